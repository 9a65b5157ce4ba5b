"""The secret corpus (tests/cases.py SECRET_CORPUS: >= 50 variants of credentials, hidden by invisible characters,
full-width or look-alike letters, split between fields, bare or in ids) through every write path: the Python API,
the CLI's JSON-lines import and the MCP server's remember tool. Afterwards no fragment is in any text column of any
table of the memory database (and the Dagster one, when it exists), in the captured logs, in the MCP server's log
or in what the embedded PostgreSQL server logged meanwhile; and the blocking data-quality check finds every variant
that reached a live unit some other way."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from memory_assets import gates, quality
from memory_assets import vocabulary as V
from memory_assets.cli import main
from memory_assets.errors import ValidationError
from tests.cases import SECRET_BASE, SECRET_CORPUS, record_reliability

# the fields the MCP server's remember tool takes (feed, model, observed_sha and source_ref it sets itself or not)
MCP_FIELDS = {"project", "kind", "type", "title", "body", "paths", "keywords", "task_id", "session_id", "persona"}


def assert_no_fragment(text: str, where: str) -> None:
    """No corpus needle in the text, as stored or in the form the gate reads (folded, invisibles removed)."""
    folded = gates.scan_form(text)
    for name, _, needle in SECRET_CORPUS:
        assert needle not in text, f"{name} found in {where}"
        assert gates.scan_form(needle) not in folded, f"{name} (folded) found in {where}"


@pytest.fixture
def server_log():
    """What the embedded PostgreSQL server logs while the test runs (its log file from here on)."""
    path = Path(os.environ[V.HOME_ENV]) / "pg" / "log"
    start = path.stat().st_size if path.is_file() else 0

    def read() -> str:
        if not path.is_file():
            return ""
        with path.open("rb") as handle:
            handle.seek(start)
            return handle.read().decode("utf-8", "replace")
    return read


def every_database(clean, stored_text) -> str:
    """The stored text of the memory database and, when it exists, the Dagster one on the same server."""
    with psycopg.connect(clean, autocommit=True) as conn:
        dagster = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (V.DAGSTER_DATABASE,)).fetchone()
    return stored_text() + ("\n" + stored_text(V.DAGSTER_DATABASE) if dagster else "")


def corpus_fields(fields: dict) -> dict:
    return {**SECRET_BASE, "task_id": "T-corpus", **fields}


def test_no_corpus_secret_persists_through_the_api(mem, clean, stored_text, caplog, server_log):
    caplog.set_level(logging.DEBUG)
    assert len(SECRET_CORPUS) >= 50
    rejected = 0
    for name, fields, _ in SECRET_CORPUS:
        try:
            result = mem.remember(**corpus_fields(fields))
        except ValidationError as error:  # an invisible character, a credential as feed or project name
            assert_no_fragment(str(error), f"the error of {name}")
        else:
            assert result.reason == V.REASON_SECRET, name
            rejected += 1
    assert rejected >= 40  # most variants pass validation and are stopped by the gate itself
    with psycopg.connect(clean) as conn:
        assert conn.execute("SELECT count(*) FROM memory_units").fetchone()[0] == 0
        counted = conn.execute("SELECT sum(count) FROM memory_rejections WHERE reason = %s",
                               (V.REASON_SECRET,)).fetchone()[0]
    assert counted == rejected
    assert_no_fragment(every_database(clean, stored_text), "the databases")
    assert_no_fragment(caplog.text, "the logs")
    assert_no_fragment(server_log(), "the PostgreSQL server log")


def test_no_corpus_secret_persists_through_the_cli_import(clean, tmp_path, stored_text, caplog, server_log):
    caplog.set_level(logging.DEBUG)
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(corpus_fields(fields)) for _, fields, _ in SECRET_CORPUS) + "\n")
    result = CliRunner().invoke(main, ["import", str(path), "--json"], catch_exceptions=False)
    summary = json.loads(result.stdout)
    assert (summary["lines"], summary["captured"]) == (len(SECRET_CORPUS), 0)
    assert summary["rejected"][V.REASON_SECRET] + len(summary["errors"]) == len(SECRET_CORPUS)
    assert result.exit_code == 2  # some variants are bad input (format characters), reported by line
    assert_no_fragment(result.output, "the import's output")
    assert_no_fragment(every_database(clean, stored_text), "the databases")
    assert_no_fragment(caplog.text, "the logs")
    assert_no_fragment(server_log(), "the PostgreSQL server log")


def test_no_corpus_secret_persists_through_the_mcp_server(clean, tmp_path, stored_text, server_log):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    cases = [(name, corpus_fields(fields)) for name, fields, _ in SECRET_CORPUS if set(fields) <= MCP_FIELDS]
    assert len(cases) >= 45
    replies: list[str] = []

    async def remember_all(errlog):
        params = StdioServerParameters(command=sys.executable, args=["-m", "memory_assets.cli", "mcp"],
                                       env={**os.environ, "HF_HUB_OFFLINE": "1"})
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for name, arguments in cases:
                result = await session.call_tool("remember", arguments)
                text = result.content[0].text
                replies.append(text)
                if not result.isError:
                    assert json.loads(text)["reason"] == V.REASON_SECRET, name

    log_path = tmp_path / "mcp-server.log"
    with log_path.open("w") as errlog:
        asyncio.run(remember_all(errlog))
    assert len(replies) == len(cases)
    assert_no_fragment("\n".join(replies), "the tool replies")
    assert_no_fragment(log_path.read_text(), "the MCP server's log")
    assert_no_fragment(every_database(clean, stored_text), "the databases")
    assert_no_fragment(server_log(), "the PostgreSQL server log")


def test_the_blocking_check_finds_every_variant_in_a_live_unit(conn):
    """A unit that reached the ledger some other way (an older gate, a direct write) is found by the check that
    blocks materialisation: it runs the same normalising gate over title, body, paths and keywords."""
    unit_fields = ("title", "body", "paths", "keywords")
    cases = [(name, {**SECRET_BASE, **fields}) for name, fields, _ in SECRET_CORPUS
             if set(fields) <= set(unit_fields)]
    assert len(cases) >= 45
    conn.execute("INSERT INTO memory_projects (project) VALUES ('acme') ON CONFLICT DO NOTHING")
    numbers = {}
    for number, (name, fields) in enumerate(cases, start=1):
        numbers[number] = name
        conn.execute("INSERT INTO memory_units (project, number, type, kind, title, body, paths, keywords, status, "
                     "confidence, importance, trust, content_hash) VALUES ('acme', %s, 'semantic', 'env', %s, %s, "
                     "%s, %s, 'active', 0.9, 0.5, 0.5, %s)",
                     (number, fields["title"], fields["body"], fields.get("paths", []), fields.get("keywords", []),
                      f"hash-{number}"))
    found = {row[0] for row in conn.execute("SELECT number FROM memory_units WHERE id = ANY (%s)",
                                            (quality.units_with_secrets(conn),))}
    assert sorted(numbers[n] for n in set(numbers) - found) == []


def test_the_corpus_holds_no_assembled_credential_in_the_repository():
    """The corpus is assembled at run time: the file itself passes the pattern detectors on each line."""
    source = (Path(__file__).resolve().parent.parent / "cases.py").read_text()
    flagged = [line for line in source.splitlines()
               if any(pattern.search(line) for name, pattern in gates._EXTRA.items()
                      if name in gates.PREFIXED_SECRET_PATTERNS)]
    assert flagged == []



@pytest.mark.soak
def test_the_soak_counts_the_corpus_and_how_each_variant_is_refused():
    """The soak's record of the corpus: every variant refused, by validation (format characters, a credential
    as a name) or by the gate, in the form `remember` reads it; the counts go to bench/results/reliability.json."""
    refused: dict[str, int] = {"validation": 0, "gate": 0}
    for name, fields, _ in SECRET_CORPUS:
        try:
            candidate = gates.validate(**corpus_fields(fields))
        except ValidationError:
            refused["validation"] += 1
        else:
            assert gates.gate(candidate) == V.REASON_SECRET, name
            refused["gate"] += 1
    assert sum(refused.values()) == len(SECRET_CORPUS)
    record_reliability("secret_corpus", "variants", {"cases": len(SECRET_CORPUS), "refused_by": refused,
                                                      "paths": ["api", "cli import", "mcp"]})
