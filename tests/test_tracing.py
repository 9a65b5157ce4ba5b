"""Traces: the span tree of remember, recall and an asset run, no text in any span, and OTLP export when asked."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import ClassVar

import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memory_assets import gates, tracing
from memory_assets import vocabulary as V
from memory_assets.defs import runner
from memory_assets.defs.ledger.assets import ledger_units
from memory_assets.defs.traced import TRACED
from memory_assets.errors import ValidationError
from memory_assets.ledger import capture
from memory_assets.recall.request import tsquery_terms
from tests.cases import EXCLUSION_CASES, REPO, SECRET_BASE, SECRET_CORPUS, SECRETS, embed_all

QUERY = "which proxy refuses plain TCP on the staging hosts"
FACTS = [("Staging needs TLS", "Staging requires sslmode=require because the proxy refuses plain TCP."),
         ("Builds need memory", "Release builds need 8 GiB because the linker holds every object.")]
TURNS = ["Lead: the staging proxy refuses plain TCP since Monday.", "Lead: we moved the TLS certificates too.",
         "Lead: the runbook lists the proxy hosts."]


class Switchable(SpanProcessor):
    """The in-memory exporter behind a switch: off once this module's tests are done, so later tests keep nothing."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.inner, self.active = SimpleSpanProcessor(exporter), True

    def on_end(self, span: ReadableSpan) -> None:
        if self.active:
            self.inner.on_end(span)


@pytest.fixture(scope="module")
def exporter():
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # OTLP export is off in tests: this module sets up the SDK
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    processor = Switchable(exporter)
    provider.add_span_processor(processor)
    yield exporter
    processor.active = False


@pytest.fixture
def spans(exporter):
    exporter.clear()
    return exporter


def tree(finished, root_name):
    """{child name: count} under the one root span of that name, and the root: what a trace viewer shows."""
    roots = [s for s in finished if s.name == root_name and s.parent is None]
    assert len(roots) == 1, [s.name for s in finished]
    root = roots[0]
    children = [s for s in finished if s.parent is not None and s.parent.span_id == root.context.span_id]
    assert all(s.context.trace_id == root.context.trace_id for s in children)
    return root, [s.name for s in sorted(children, key=lambda s: s.start_time)]


def attributes(span):
    return {k.removeprefix(V.TRACE_ATTRIBUTE_PREFIX): v for k, v in span.attributes.items()}


def remember(mem, title, body, **fields):
    return mem.remember(**{"project": "acme", "kind": "env", "type": "semantic", "title": title, "body": body,
                           **fields})


def test_remember_is_one_span_with_validate_gates_and_fold(mem, spans):
    result = remember(mem, *FACTS[0], task_id="T-1")
    root, children = tree(spans.get_finished_spans(), "memory.remember")
    assert children == ["memory.remember.validate", "memory.remember.gates", "memory.remember.fold"]
    assert attributes(root) == {"project": "acme", "feed": "api", "kind": "env", "type": "semantic",
                                "status": result.status, "token": result.token, "unit_id": result.unit_id}
    spans.clear()
    rejected = remember(mem, "Deploy key", "Deploy with " + SECRETS[0][1] + " on the staging host.")
    root, children = tree(spans.get_finished_spans(), "memory.remember")
    assert children == ["memory.remember.validate", "memory.remember.gates"]  # nothing folded
    assert attributes(root)["status"] == V.OUTCOME_REJECTED and attributes(root)["reason"] == rejected.reason


def test_remember_many_is_one_span_with_gates_and_fold(mem, spans):
    rows = [gates.validate(project="acme", kind="env", type="semantic", title=t, body=b) for t, b in FACTS]
    rows.append(gates.validate(project="acme", kind="decision", type="semantic", title="Use X", body="We chose X."))
    mem.remember_many(rows)
    root, children = tree(spans.get_finished_spans(), "memory.remember_many")
    assert children == ["memory.remember.gates", "memory.remember.fold"]
    assert attributes(root) == {"candidates": 3, "captured": 2, "inserted": 2, "rejected": 1}


def test_recall_is_one_span_with_encode_the_legs_fusion_and_citations(mem, conn, embedder, spans, monkeypatch):
    day = datetime.now(UTC) - timedelta(days=1)
    for title, body in FACTS:
        remember(mem, title, body)
    for turn in TURNS:
        remember(mem, turn, turn, kind="note", type="episodic", session_id="S-1", valid_from=day)
    embed_all(conn, embedder)
    mem.encoder(mem.serving_model(), "load the model")
    spans.clear()
    result = mem.recall("acme", QUERY, k=3)  # a new question: encoded while the full-text leg's statement runs
    root, children = tree(spans.get_finished_spans(), "memory.recall")
    assert children == ["memory.recall.encode", "memory.recall.legs", "memory.recall.legs", "memory.recall.fusion",
                        "memory.recall.score", "memory.recall.citations"]
    assert attributes(root) == {"project": "acme", "k": 3, "legs": "hybrid", "terms": len(tsquery_terms(QUERY)),
                                "historical": False, "prf": False, "second_round": False, "rerank": False,
                                "mode": "hybrid", "hits": len(result.hits), "notes": 0}
    by_name = {s.name: attributes(s) for s in spans.get_finished_spans()}
    assert by_name["memory.recall.encode"] == {"model": mem.serving_model(), "vector": True}
    units = len(FACTS) + len(TURNS)
    full_text, dense = [attributes(s) for s in spans.get_finished_spans() if s.name == "memory.recall.legs"]
    assert full_text["dense"] == 0 and 0 < full_text["sparse"] < full_text["rows"] == units  # a small project: the
    # full-text statement details every unit, the dense one is the nearest vectors alone
    assert dense["dense"] == dense["rows"] == units and dense["sparse"] == 0 and full_text["near"] + dense["near"] > 0
    assert by_name["memory.recall.fusion"] == {"candidates": units}
    assert by_name["memory.recall.citations"]["rows"] == len(result.hits) == 3
    spans.clear()
    assert mem.recall("acme", QUERY, k=3).hits == result.hits  # asked again: the vector cached, nothing encoded, the
    root, children = tree(spans.get_finished_spans(), "memory.recall")  # two statements (a project known small)
    assert children == ["memory.recall.legs", "memory.recall.legs", "memory.recall.fusion", "memory.recall.score",
                        "memory.recall.citations"]
    assert [attributes(s) for s in spans.get_finished_spans() if s.name == "memory.recall.legs"] == [
        {**full_text, "planned": True}, {**dense, "planned": True}]  # the project's own plans from its 2nd request
    monkeypatch.setattr(V, "RECALL_ALL_DETAILS_MAX_UNITS", 0)  # a project past the bound: the one statement
    spans.clear()
    assert mem.recall("acme", QUERY, k=3).hits == result.hits
    root, children = tree(spans.get_finished_spans(), "memory.recall")
    assert children == ["memory.recall.legs", "memory.recall.fusion", "memory.recall.score", "memory.recall.citations"]
    legs = next(attributes(s) for s in spans.get_finished_spans() if s.name == "memory.recall.legs")
    assert legs["dense"] == legs["rows"] == units and 0 < legs["sparse"] < units and legs["near"] > 0


def test_an_asset_run_is_one_span_with_its_partition_and_counts(mem, spans, today):
    with mem.connection() as conn:
        capture.remember_many(conn, [gates.validate(project="acme", kind="env", type="semantic", title=t, body=b)
                                     for t, b in FACTS], fold_now=False)
    spans.clear()
    day = today.isoformat()
    result = runner.materialize_asset(ledger_units.key, runner.dagster_instance(mem.url), partition_key=day)
    root, children = tree(spans.get_finished_spans(), "asset.ledger_units")
    assert children == []  # the fold is set-based SQL in the asset itself; its checks are not traced
    refreshed = result.get_asset_materialization_events()[0].materialization.metadata[V.STATISTICS_REFRESHED].value
    assert attributes(root) == {"asset_key": "ledger_units", "run_id": result.run_id, "partition_key": day,
                                "partitions": 1, "days": 1, "units_inserted": 2, "sources_linked": 2, "rows_refused": 0,
                                V.STATISTICS_REFRESHED: refreshed}  # as the run says: autovacuum may have analysed
    # the truncated table first (a full test run met it); tests/defs/ledger/test_assets.py tests when it refreshes
    assert root.end_time > root.start_time


def test_every_asset_of_the_code_location_is_traced():
    assets = runner.code_location().assets or []
    bodies = {a.key.to_user_string(): a.op.compute_fn.decorated_fn for a in assets}
    assert bodies and all(getattr(body, TRACED, False) for body in bodies.values()), sorted(bodies)


def test_no_span_carries_unit_text_a_query_or_a_secret(mem, spans):
    texts: list[str] = [QUERY]
    for title, body in FACTS:
        remember(mem, title, body)
        texts += [title, body]
    for reason, fields in EXCLUSION_CASES:
        result = mem.remember(**{"project": "acme", "kind": "env", "type": "semantic", "title": "Importer",
                                 **fields})
        assert result.reason == reason
        texts += [v for v in fields.values() if isinstance(v, str) and len(v) > 12]
    for _, secret, needle in SECRETS:
        assert remember(mem, "Deploy key", f"Deploy with {secret} here.").reason == V.REASON_SECRET
        texts += [secret, needle]
    for _, fields, needle in SECRET_CORPUS:
        with contextlib.suppress(ValidationError):  # an invisible character: refused before the gate
            mem.remember(**{**SECRET_BASE, **fields})
        texts += [*(v for v in fields.values() if isinstance(v, str) and len(v) > 12), needle]
    batch = [gates.validate(**{**SECRET_BASE, "body": f"Use {secret} for it.", "task_id": f"T-{i}"})
             for i, (_, secret, _) in enumerate(SECRETS)]
    mem.remember_many(batch)
    secret = SECRETS[2][1]
    with pytest.raises(ValidationError):  # an error message may quote the input: spans keep the type only
        remember(mem, "Deploy key", "Some body text here.", kind=secret)
    with pytest.raises(ValidationError):
        mem.recall("acme", QUERY, kinds=[secret])
    mem.recall("acme", f"{QUERY} {secret}")
    mem.recall("acme", QUERY)
    finished = spans.get_finished_spans()
    assert {"memory.remember", "memory.remember_many", "memory.recall"} <= {s.name for s in finished}
    failed = [s for s in finished if not s.status.is_ok]
    assert failed and all(s.status.description == "ValidationError" for s in failed)
    shown = []  # what a span says beyond its fixed name and attribute keys
    for span in finished:
        shown += [span.status.description or "", *map(str, span.attributes.values())]
        shown += [f"{e.name} {dict(e.attributes or {})}" for e in span.events]
    haystack = "\n".join(shown)
    for text in texts:
        assert text not in haystack
        windows = {text[i:i + 10] for i in range(max(1, len(text) - 9))}  # no 10 characters of it either
        assert not [w for w in windows if w in haystack], text


def test_record_keeps_ids_and_numbers_and_replaces_anything_else(spans):
    with tracing.span("memory.test", project="acme", token="mem-12", units=3, share=0.5, missing=None,
                      model="minilm-l6@gt0.1-t1", partition_key="minilm-l6@gt0.1-t1|2024-01-01",
                      title="Staging needs TLS", query="which proxy", secret="x" * 300):
        pass
    (span,) = spans.get_finished_spans()
    assert attributes(span) == {"project": "acme", "token": "mem-12", "units": 3, "share": 0.5,
                                "model": "minilm-l6@gt0.1-t1", "partition_key": "minilm-l6@gt0.1-t1|2024-01-01",
                                "title": V.TRACE_REDACTED, "query": V.TRACE_REDACTED, "secret": V.TRACE_REDACTED}


# --- OTLP export, in fresh processes (a process sets its tracer provider once) -------------------------------

EXPORT = """
import json, sys
from opentelemetry import trace
from memory_assets import tracing
configured = [tracing.configure("cli"), tracing.configure("api")]
with tracing.span("memory.remember", project="acme"):
    with tracing.span("memory.remember.validate"):
        pass
tracing.flush()
print(json.dumps({"configured": configured, "provider": type(trace.get_tracer_provider()).__name__}))
"""


class Collector(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, str, bytes]]] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Collector.received.append((self.path, self.headers["Content-Type"], body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def collector():
    Collector.received = []
    server = HTTPServer(("127.0.0.1", 0), Collector)  # a free port
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def export(endpoint: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    if endpoint is not None:
        env[V.OTEL_ENDPOINT_ENV] = endpoint
    done = subprocess.run([sys.executable, "-c", EXPORT], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_spans_are_posted_over_otlp_http_when_the_endpoint_is_set(collector):
    outcome = export(f"http://127.0.0.1:{collector.server_port}")
    assert outcome == {"configured": [True, True], "provider": "TracerProvider"}
    assert [(path, kind) for path, kind, _ in Collector.received] == [("/v1/traces", "application/x-protobuf")]
    request = ExportTraceServiceRequest.FromString(Collector.received[0][2])
    (resource_spans,) = request.resource_spans
    resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
    assert resource["service.name"] == V.TRACE_SERVICE_NAME
    assert resource[V.TRACE_ATTRIBUTE_PREFIX + "interface"] == "cli"  # the first set-up wins
    names = {s.name: s for scope in resource_spans.scope_spans for s in scope.spans}
    assert set(names) == {"memory.remember", "memory.remember.validate"}
    assert names["memory.remember.validate"].parent_span_id == names["memory.remember"].span_id


@pytest.mark.parametrize("endpoint", [None, "", "  "])
def test_nothing_is_set_up_without_an_endpoint(endpoint):
    assert export(endpoint) == {"configured": [False, False], "provider": "ProxyTracerProvider"}


def test_the_api_global_that_active_reads_is_there_and_follows_the_provider():
    """active() reads OpenTelemetry's private trace._TRACER_PROVIDER: pinned here, in a fresh interpreter, so an
    upgrade that renames it fails this test instead of quietly sending every span down the API's slower path."""
    script = ("from opentelemetry import trace\n"
              "from opentelemetry.sdk.trace import TracerProvider\n"
              "from memory_assets import tracing\n"
              "before = (hasattr(trace, '_TRACER_PROVIDER'), trace._TRACER_PROVIDER, tracing.active())\n"
              "trace.set_tracer_provider(TracerProvider())\n"
              "print(before, trace._TRACER_PROVIDER is not None, tracing.active())\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env).stdout
    assert out.split() == ["(True,", "None,", "False)", "True", "True"]
