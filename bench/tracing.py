"""Tracing overhead: what the spans cost remember() and recall() with traces off (no endpoint) and on (the SDK)."""

from __future__ import annotations

import argparse
import os
import sys
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bench.common import median, scratch_memory, write_result
from bench.ingest import candidates
from memory_assets import embeddings, tracing
from memory_assets import vocabulary as V

QUERIES = ["which service needs more memory", "staging proxy settings", "how big is the build cache",
           "where does the backup go", "vpn batch working set"]


def span_cost_us(number: int) -> dict[str, float]:
    """Microseconds per no-op span (the context manager with attributes) and per traced call, medians of 5."""
    def stage() -> None:
        with tracing.span("bench.stage", project="acme", rows=3):
            pass

    @tracing.traced("bench.call", tracing.rows)
    def traced() -> list[int]:
        return [1]

    def plain() -> list[int]:
        return [1]

    def per_call(fn) -> float:
        return median(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6

    return {"span": round(per_call(stage), 3), "traced_call": round(per_call(traced) - per_call(plain), 3),
            "annotate": round(per_call(lambda: tracing.annotate(project="acme", k=3)), 3)}


def latencies(mem, project: str, n: int, offset: int) -> dict[str, list[float]]:
    """Milliseconds per remember() of n new units, and per recall() of the queries (vectors cached after one)."""
    remember, recall = [], []
    for candidate in candidates(n, project, offset=offset):
        start = time.perf_counter()
        mem.remember(project=candidate.project, kind=candidate.kind, type=candidate.type, title=candidate.title,
                     body=candidate.body, keywords=list(candidate.keywords), task_id=candidate.task_id, feed="bench")
        remember.append((time.perf_counter() - start) * 1e3)
    for i in range(n):
        start = time.perf_counter()
        mem.recall(project, QUERIES[i % len(QUERIES)], k=10)
        recall.append((time.perf_counter() - start) * 1e3)
    return {"remember": remember, "recall": recall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=300, help="remember() and recall() calls per phase")
    parser.add_argument("--span-loops", type=int, default=100_000)
    args = parser.parse_args()
    assert not tracing.configure("api"), f"unset {V.OTEL_ENDPOINT_ENV}: this benchmark sets up its own exporter"
    with scratch_memory() as mem:
        project = "trace-bench"
        with mem.connection() as conn:  # a project of embedded units, so recall runs both legs
            mem.remember_many(candidates(2000, project, offset=100_000))
            embedder = embeddings.embedder_for(mem.serving_model())
            embeddings.embed_units(conn, embedder, embeddings.stale_units(conn, embedder.spec.key, limit=10_000))
        latencies(mem, project, 20, offset=200_000)  # warm the pool, the model and the query cache
        off_span = span_cost_us(args.span_loops)
        off = latencies(mem, project, args.calls, offset=0)
        exported = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(exported))
        trace.set_tracer_provider(provider)  # traces on, from here to the end of the process
        on = latencies(mem, project, args.calls, offset=10_000)
        provider.force_flush()
        on_span = span_cost_us(args.span_loops)
    finished = exported.get_finished_spans()
    per = {name: sum(1 for s in finished if s.name.startswith(prefix)) / args.calls
           for name, prefix in (("remember", "memory.remember"), ("recall", "memory.recall"))}
    medians = {phase: {op: round(median(values), 3) for op, values in runs.items()}
               for phase, runs in (("off", off), ("on", on))}
    share_off = {op: round(per[op] * (off_span["span"] + off_span["annotate"]) / 1e3 / medians["off"][op] * 100, 4)
                 for op in per}
    write_result("tracing", {
        "calls_per_phase": args.calls, "project_units": 2000 + 2 * args.calls,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "spans_per_call": per,
        "us_per_noop": off_span, "us_per_recorded": on_span,
        "median_ms": medians,
        "noop_overhead_percent_of_median": share_off,
        "on_over_off_median_ratio": {op: round(medians["on"][op] / medians["off"][op], 3) for op in per},
        "note": "one run on a shared machine: the off/on medians are sequential phases (a provider is set once "
                "per process); the no-op share is spans_per_call x (span + annotate cost) / the off median",
    })


if __name__ == "__main__":
    main()
