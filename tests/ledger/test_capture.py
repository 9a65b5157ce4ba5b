"""The write path on the real database: dedupe, numbering under concurrency, rejections that leave no text."""

import contextlib
import dataclasses
import logging
import multiprocessing
import random
import re
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest

import memory_assets
from bench.recall_stages import round_trips
from memory_assets import authz, database, gates, quality, tokens
from memory_assets import vocabulary as V
from memory_assets.api import Memory
from memory_assets.ledger import canon, capture, units
from tests.cases import (
    EXCLUSION_CASES,
    READS_ITS_SOURCES,
    SECRETS,
    function_in_migration,
    rerun_migrations_from,
    until_waiting_on_a_lock,
)

GOTCHA = dict(kind="gotcha", type="procedural", title="Dagster 1.13.28 breaks dagster-postgres",
              body="pip resolves a 2021 dagster-postgres with dagster 1.13.28.\n"
                   "Repro: pip install dagster==1.13.28 dagster-postgres")


def test_remember_inserts_and_exact_duplicate_adds_a_source(mem):
    first = mem.remember(project="acme", task_id="T-1", **GOTCHA)
    assert (first.status, first.token) == ("active", "mem-1")
    again = mem.remember(project="acme", task_id="T-2", **{**GOTCHA, "title": GOTCHA["title"].upper()})
    assert (again.status, again.token, again.unit_id) == ("duplicate", "mem-1", first.unit_id)
    replay = mem.remember(project="acme", task_id="T-2", **GOTCHA)
    assert replay.status == "duplicate"
    unit = mem.unit("acme", "mem-1")
    assert [s["task_id"] for s in unit["sources"]] == ["T-1", "T-2"]
    assert mem.unit("acme", "mem-2") is None


@pytest.mark.parametrize("confidence,status", [(0.3, "review"), (0.7, "proposed"), (0.95, "active")])
def test_initial_status_follows_confidence(mem, confidence, status):
    assert mem.remember(project="acme", confidence=confidence, **GOTCHA).status == status


def test_fifty_concurrent_writers_of_one_fact_leave_one_unit_and_fifty_sources(mem, conn):
    barrier = threading.Barrier(50)

    def write(i):
        barrier.wait()
        return mem.remember(project="acme", task_id=f"T-{i}", **GOTCHA)

    with ThreadPoolExecutor(50) as pool:
        results = list(pool.map(write, range(50)))
    assert len({r.unit_id for r in results}) == 1
    assert sorted(r.status for r in results).count("duplicate") == 49
    assert conn.execute("SELECT count(*) FROM memory_units "
                        "WHERE status IN ('proposed','review','active')").fetchone()[0] == 1
    assert conn.execute("SELECT count(*) FROM memory_sources").fetchone()[0] == 50


def test_twenty_concurrent_first_writes_to_a_new_project_number_without_gaps(mem, conn):
    barrier = threading.Barrier(20)

    def write(i):
        barrier.wait()
        return mem.remember(project="brand-new", kind="env", type="semantic", title=f"Fact number {i}",
                            body=f"Service {i} listens on port {8000 + i} because the proxy maps it.", task_id=f"T-{i}")

    with ThreadPoolExecutor(20) as pool:
        tokens = [r.token for r in pool.map(write, range(20))]
    assert sorted(tokens, key=lambda t: int(t[4:])) == [f"mem-{n}" for n in range(1, 21)]
    assert conn.execute("SELECT memory_last_number('brand-new')").fetchone()[0] == 20


def test_each_rejection_is_counted_and_leaves_no_text(mem, conn, stored_text):
    for reason, overrides in EXCLUSION_CASES:
        fields = dict(project="acme", kind="env", type="semantic", title="Staging needs TLS", task_id="T-9")
        fields.update(overrides)
        assert mem.remember(**fields).reason == reason
    counts = dict(conn.execute("SELECT reason, sum(count) FROM memory_rejections GROUP BY reason").fetchall())
    assert counts == {V.REASON_DECISION_KIND: 1, V.REASON_SESSION_SUMMARY: 1, V.REASON_TASK_STATE: 2,
                      V.REASON_LOCATOR_ONLY: 1, V.REASON_VERBATIM_FILE_TEXT: 1, V.REASON_GOTCHA_WITHOUT_REPRO: 1}
    dump = stored_text()
    for _, overrides in EXCLUSION_CASES:
        for fragment in (overrides["body"][:25], overrides["body"][-25:]):
            assert fragment not in dump


def test_a_canon_document_is_bounded_and_its_path_checked_before_anything_is_stored(mem, conn):
    """Regression (an attacker's pass): 100,000 paragraphs took 124 s in one transaction (and every later write of
    the project compares with each), and a 5 MB path was stored unchecked."""
    paragraph = "The relay restarts at midnight because the vendor said so."
    many = "\n\n".join(f"{paragraph} ({i})" for i in range(V.CANON_MAX_CHUNKS + 1))
    refused = [((lambda: mem.register_canon("acme", "README.md", many)), rf"^text: at most {V.CANON_MAX_CHUNKS} "),
               ((lambda: mem.register_canon("acme", "x" * 5_000_000, paragraph)), r"^path: at most 200 characters"),
               ((lambda: mem.register_canon("acme", "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", paragraph)),
                "^path: looks like a credential")]
    for call, message in refused:
        with pytest.raises(memory_assets.ValidationError, match=message):
            call()
    assert conn.execute("SELECT count(*) FROM memory_canon").fetchone()[0] == 0
    assert mem.register_canon("acme", "README.md", many.rsplit("\n\n", 1)[0]) == V.CANON_MAX_CHUNKS


def test_canon_duplicates_are_rejected_per_project(mem):
    readme = ("# Setup\n\nStaging PostgreSQL requires sslmode=require because the proxy refuses plain TCP "
              "connections from the office network.")
    assert mem.register_canon("acme", "README.md", readme) == 1
    restated = dict(kind="env", type="semantic", title="Staging TLS", paths=["README.md"],
                    body="Staging PostgreSQL requires sslmode=require because the proxy refuses plain TCP connections.")
    assert mem.remember(project="acme", **restated).reason == V.REASON_CANON_DUPLICATE
    assert mem.remember(project="other", **restated).status == "active"


README = ("# Setup\n\nStaging PostgreSQL requires sslmode=require because the proxy refuses plain TCP connections "
          "from the office network.")
RESTATED = dict(project="acme", kind="env", type="semantic", title="Staging TLS", paths=["README.md"],
                body="Staging PostgreSQL requires sslmode=require because the proxy refuses plain TCP connections.")


@pytest.fixture
def context_reads(monkeypatch) -> list[str]:
    """The projects whose kill switch and canon a write read before its gates (canon.write_context's calls)."""
    reads: list[str] = []
    read = canon.write_context

    def counted(conn, project):
        reads.append(project)
        return read(conn, project)

    monkeypatch.setattr(canon, "write_context", counted)
    return reads


def test_a_write_reads_no_canon_a_process_kept_and_learns_of_a_change_from_the_write_itself(mem, context_reads):
    """remember() is one statement once a process kept the project's canon: the write carries the canon's version,
    and when another process registered a document meanwhile the write stores nothing, the canon is read anew and
    the candidate gated under it (rejected here: it restates the new document)."""
    assert mem.remember(**{**RESTATED, "body": "The relay listens on 8000."}).status == "active"
    assert mem.remember(**{**RESTATED, "body": "The relay listens on 8001."}).status == "active"
    assert context_reads == ["acme"]
    other = Memory(mem.pool, mem.url)  # another process's memory: its own kept canons
    assert other.register_canon("acme", "README.md", README) == 1
    assert mem.remember(**RESTATED).reason == V.REASON_CANON_DUPLICATE
    assert context_reads == ["acme", "acme"]
    with mem.connection() as conn:
        assert conn.execute("SELECT count(*) FROM memory_inbox WHERE body LIKE 'Staging%'").fetchone()[0] == 0


def test_a_rejection_under_a_kept_canon_is_counted_only_once_that_canon_is_still_the_projects(mem, conn,
                                                                                          context_reads):
    """A candidate that restates a document the project has since replaced (or dropped: a TRUNCATE too) is gated
    again under the canon as it is now, before any rejection is counted."""
    mem.register_canon("acme", "README.md", README)
    assert mem.remember(**RESTATED).reason == V.REASON_CANON_DUPLICATE  # the process keeps this canon now
    Memory(mem.pool, mem.url).register_canon("acme", "README.md", "# Setup\n\nThe relay is Ostwind's and it "
                                                                  "listens on port 8000 for the office network.")
    assert mem.remember(**RESTATED).status == "active"
    mem.register_canon("acme", "NOTES.md", README)
    assert mem.remember(**{**RESTATED, "title": "Staging TLS again"}).reason == V.REASON_CANON_DUPLICATE
    conn.execute("TRUNCATE memory_canon")
    conn.commit()
    assert mem.remember(**{**RESTATED, "title": "Staging TLS once more"}).status == "active"
    rejected = conn.execute("SELECT sum(count) FROM memory_rejections WHERE reason = %s",
                            (V.REASON_CANON_DUPLICATE,)).fetchone()[0]
    assert rejected == 2


def test_no_secret_of_any_kind_persists_or_is_logged(mem, stored_text, caplog):
    caplog.set_level(logging.DEBUG)
    assert len(SECRETS) >= 15
    for name, secret, _ in SECRETS:
        placements = [
            dict(title=f"Token {secret}"[:80], body="Use this value for the deploy step, it is required."),
            dict(title="Deploy credential", body=f"Deploy with {secret} on the staging host."),
            dict(title="Deploy credential file", body="The deploy step reads its credential from this path.",
                 paths=[f"config/{secret}"]),
        ]
        for i, placement in enumerate(placements):
            result = mem.remember(project="acme", kind="env", type="semantic", task_id=f"{name}-{i}", **placement)
            assert result.reason == V.REASON_SECRET, (name, i)
    dump = stored_text()
    logs = caplog.text
    for name, _, needle in SECRETS:
        assert needle not in dump, name
        assert needle not in logs, name


def test_decision_kind_is_refused_by_api_and_database(mem, conn):
    assert mem.remember(project="acme", kind="decision", type="semantic", title="Use PostgreSQL",
                        body="We chose PostgreSQL.").reason == V.REASON_DECISION_KIND
    conn.execute("INSERT INTO memory_projects (project) VALUES ('acme') ON CONFLICT DO NOTHING")
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("INSERT INTO memory_units (project, number, type, kind, title, body, status, confidence, "
                     "importance, trust, content_hash) VALUES ('acme', 1, 'semantic', 'decision', 't', 'b', "
                     "'active', 0.9, 0.5, 0.5, 'h')")


GOOD_ROW = dict(project="acme", number=1, type="semantic", kind="env", title="t", body="b", status="active",
                confidence=0.9, importance=0.5, trust=0.5, content_hash="h")
BAD_VALUES = [("number", 0, "number > 0"), ("type", "factual", "type in"), ("kind", "decision", "kind in"),
              ("title", "x" * 81, "title at most 80"), ("body", "y" * 1201, "body at most 1200"),
              ("status", "deleted", "status in"), ("confidence", 1.5, "confidence between"),
              ("importance", -0.1, "importance between"), ("trust", 2.0, "trust between"),
              ("confirms", -1, "confirms >= 0"), ("flags", -1, "flags >= 0"), ("revision", 0, "revision >= 1"),
              ("body", " ", "not blank"), ("title", "   ", "not blank"),
              ("valid_until", datetime(2000, 1, 1, tzinfo=UTC), "valid_until >= valid_from")]


def insert_unit(conn, row: dict[str, Any]) -> None:
    """Insert a unit row as given, straight into the table (past every API check)."""
    conn.execute(f"INSERT INTO memory_units ({', '.join(row)}) VALUES ({', '.join(['%s'] * len(row))})",
                 list(row.values()))


@pytest.mark.parametrize("column,value,rule", BAD_VALUES)
def test_database_refuses_bad_rows(conn, column, value, rule):
    """Each of the units' rules (sql/036's one CHECK) refuses a row that breaks it, on insert and on update, and
    names the rule without the row's text."""
    conn.execute("INSERT INTO memory_projects (project) VALUES ('acme') ON CONFLICT DO NOTHING")
    row = {**GOOD_ROW, column: value}
    with pytest.raises(psycopg.errors.CheckViolation, match=re.escape(rule)) as refused:
        insert_unit(conn, row)
    assert refused.value.diag.constraint_name == "memory_units_rules"
    assert "Failing row" not in str(refused.value)  # the row's text stays out of the error, and so of logs
    insert_unit(conn, GOOD_ROW)
    stored = conn.execute(f"SELECT {column} FROM memory_units WHERE project = 'acme'").fetchone()[0]
    with pytest.raises(psycopg.errors.CheckViolation, match=re.escape(rule)):
        conn.execute(f"UPDATE memory_units SET {column} = %s WHERE project = 'acme'", (value,))
    assert conn.execute(f"SELECT {column} FROM memory_units WHERE project = 'acme'").fetchone()[0] == stored


def test_no_schema_on_the_search_path_stands_in_for_a_rules_operator(conn):
    """The rules' function resolves its operators in pg_catalog, as the CHECKs it replaced stored them: a schema put
    ahead of pg_catalog with a `>` that always holds does not let a unit numbered -7 in."""
    conn.execute("INSERT INTO memory_projects (project) VALUES ('acme') ON CONFLICT DO NOTHING")
    conn.execute("CREATE SCHEMA lenient")
    try:
        conn.execute("CREATE FUNCTION lenient.always(bigint, integer) RETURNS boolean LANGUAGE sql AS 'SELECT true'")
        conn.execute("CREATE OPERATOR lenient.> (LEFTARG = bigint, RIGHTARG = integer, FUNCTION = lenient.always)")
        with conn.transaction():
            conn.execute("SET LOCAL search_path = lenient, public, pg_catalog")
            assert conn.execute("SELECT (-7)::bigint > 0").fetchone()[0] is True  # the stand-in is what > means here
            row = {**GOOD_ROW, "number": -7}
            with pytest.raises(psycopg.errors.CheckViolation, match="number > 0"), conn.transaction():
                insert_unit(conn, row)
    finally:
        conn.execute("DROP SCHEMA lenient CASCADE")


def test_database_keeps_what_its_rules_allow(conn):
    """The rules' edges pass: a blank forgotten tombstone, no end of validity, the limits themselves."""
    conn.execute("INSERT INTO memory_projects (project) VALUES ('acme') ON CONFLICT DO NOTHING")
    rows = [{**GOOD_ROW, "status": "forgotten", "title": "", "body": ""},
            {**GOOD_ROW, "number": 2, "title": "x" * 80, "body": "y" * 1200, "confidence": 0, "importance": 1,
             "trust": 1, "valid_until": None},
            {**GOOD_ROW, "number": 3, "valid_from": datetime(2000, 1, 1, tzinfo=UTC),
             "valid_until": datetime(2000, 1, 1, tzinfo=UTC), "status": "retired"}]
    for row in rows:
        insert_unit(conn, row)
    assert conn.execute("SELECT count(*) FROM memory_units WHERE project = 'acme'").fetchone()[0] == 3


def test_live_content_is_unique_in_the_database(mem, conn):
    unit = mem.unit("acme", mem.remember(project="acme", **GOTCHA).token)
    with pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute("INSERT INTO memory_units (project, number, type, kind, title, body, status, confidence, "
                     "importance, trust, content_hash) VALUES ('acme', 2, 'procedural', 'gotcha', 't', 'b', "
                     "'proposed', 0.9, 0.5, 0.5, %s)", (unit["content_hash"],))


def test_bad_input_writes_nothing(mem, conn):
    for bad in (dict(title="x" * 81), dict(body=""), dict(kind="opinion"), dict(confidence=1.5),
                dict(title="broken \udcff")):
        with pytest.raises(memory_assets.ValidationError):
            mem.remember(project="acme", **{**GOTCHA, **bad})
    for table in ("memory_units", "memory_inbox", "memory_sources", "memory_rejections", "audit_log"):
        assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table


def test_the_database_checks_match_the_vocabulary(conn):
    """The CHECK constraints and the live-content index speak the vocabulary module's sets, no more, no less."""
    checks = [row[0] for row in conn.execute(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'memory_units'::regclass "
        "AND contype = 'c'")]
    assert checks == ["CHECK (memory_unit_rules_hold(number, type, kind, title, body, status, confidence, importance, "
                      "trust, confirms, flags, revision, valid_from, valid_until))"], checks  # sql/036: the one CHECK
    definitions = conn.execute("SELECT prosrc FROM pg_proc WHERE proname = 'memory_unit_rules_hold'").fetchone()[0]
    assert f"char_length(title) OPERATOR(pg_catalog.<=) {V.TITLE_MAX_CHARS}" in definitions
    assert f"char_length(body) OPERATOR(pg_catalog.<=) {V.BODY_MAX_CHARS}" in definitions
    for value in (*V.KINDS, *V.TYPES, *V.STATUSES):
        assert f"'{value}'" in definitions, value
    assert "'decision'" not in definitions
    index = conn.execute("SELECT pg_get_indexdef('memory_units_live_content'::regclass)").fetchone()[0]
    assert all(f"'{s}'" in index for s in V.LIVE_STATUSES)
    assert not any(f"'{s}'" in index for s in set(V.STATUSES) - set(V.LIVE_STATUSES))
    assert set(V.EXCLUSION_KINDS) | {V.REASON_DECISION_KIND, V.REASON_SECRET} == set(V.REJECTION_REASONS)
    for table in ("memory_sources", "memory_inbox"):
        check = " ".join(row[0] for row in conn.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'c' "
            "AND pg_get_constraintdef(oid) LIKE '%%visibility%%'", (table,)))
        assert all(f"'{v}'" in check for v in V.VISIBILITIES), table


def test_a_units_audience_widens_with_each_contribution(mem, conn):
    """private_to: the first private contributor, then every private one, then everyone once a source is shared."""
    def audience():
        return conn.execute("SELECT private_to FROM memory_units WHERE project = 'acme' AND number = 1").fetchone()[0]

    fact = dict(project="acme", kind="env", type="semantic", title="Relay vendor", body="The relay comes from Ostwind.")
    mem.remember(**fact, persona="ana", task_id="T-1", visibility="private")
    assert audience() == ["ana"]
    mem.remember(**fact, persona="bo", task_id="T-2", visibility="private")
    assert audience() == ["ana", "bo"]
    assert quality.units_with_wrong_audience(conn) == []
    mem.remember(**fact, persona="cy", task_id="T-3")
    assert audience() is None
    mem.remember(**fact, persona="dee", task_id="T-4", visibility="private")  # a shared fact stays shared
    assert audience() is None and quality.units_with_wrong_audience(conn) == []
    assert source_rows(conn) == [("T-1", "ana", "private"), ("T-2", "bo", "private"), ("T-3", "cy", "project"),
                                 ("T-4", "dee", "private")]


def test_a_private_unit_names_no_other_persona_and_a_correction_never_names_it(mem):
    """Regression (an attacker's pass): one live unit per content (DESIGN.md invariant 4) means a persona whose private
    write matches another persona's private unit joins it; the unit then listed every persona of its audience and
    its writer to it, and a correction of another unit to that text was refused naming the private unit's token.
    A reader now sees only its own persona there (operators, who forget, see it whole), and the refusal names no
    unit."""
    secret = dict(project="acme", kind="env", type="semantic", title="Reorg plan",
                  body="Team Kettle will be dissolved in Q3.")
    bobs = mem.remember(**secret, persona="bob", visibility="private")
    assert mem.remember(**secret, persona="alice", visibility="private", task_id="T-2").token == bobs.token
    def seen_by(actor):
        unit = mem.unit("acme", bobs.token, actor=actor)
        return unit["private_to"], unit["created_by"], unit["updated_by"]

    assert seen_by(authz.Actor.reader("acme", "alice")) == (["alice"], None, None)
    assert seen_by(authz.Actor.reader("acme", "bob")) == (["bob"], "bob", "bob")
    assert seen_by(authz.Actor.for_project("acme", "op", forget=True)) == (["alice", "bob"], "bob", "bob")
    shared = mem.remember(project="acme", kind="env", type="semantic", title="Kettle", body="Kettle ships on Fridays.")
    with pytest.raises(memory_assets.ValidationError) as refused:
        mem.correct("acme", shared.token, title=secret["title"], body=secret["body"])
    assert str(refused.value) == "body: another unit of the project already holds this text"


def source_rows(conn):
    """(task, persona, visibility) of every source, oldest first, read as the owner."""
    return conn.execute("SELECT task_id, persona, visibility FROM memory_sources ORDER BY id").fetchall()


def test_named_queries_spell_the_live_statuses_from_the_vocabulary():
    """No named query hand-types the live-status list: each spells {live_statuses} from the vocabulary."""
    for name in database.query_names():
        raw = (database.sql_dir() / "queries" / f"{name}.sql").read_text()
        assert "{live_statuses}" not in database.query(name) and "'proposed', 'review'" not in raw, name


def test_the_fold_functions_speak_the_vocabulary(conn):
    """memory_fold and memory_remember_gated (sql/functions/) spell statuses, outcomes, visibilities, the token
    prefix, the kill switch and the column lists as literals: read back from the database, they are the vocabulary's,
    so the probes and the ON CONFLICT match the live-content index (which the set-based fold names, to retry its
    insert where that index refused a row), the captured columns match the inbox's, and the one-row fold writes a
    unit and a source exactly as the set-based one does."""
    fold, remember = (" ".join(conn.execute(f"SELECT pg_get_functiondef('{name}'::regproc)").fetchone()[0].split())
                      for name in ("memory_fold", "memory_remember_gated"))
    live = f"status IN {database.sql_list(V.LIVE_STATUSES)}"
    forgotten = f"status = '{V.STATUS_FORGOTTEN}'"
    index = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'memory_units_live_content'").fetchone()
    statuses = ", ".join(f"'{status}'::text" for status in V.LIVE_STATUSES)
    assert index and index[0].endswith(f"WHERE (status = ANY (ARRAY[{statuses}]))"), index
    assert "violated IS DISTINCT FROM 'memory_units_live_content'" in fold
    for body, lives, forgottens in ((fold, 3, 0), (remember, 3, 0)):  # forgotten content: the view below
        assert body.count(live) == lives and body.count(forgotten) == forgottens, body
        assert not any(f"'{s}'" in body.replace(live, "") for s in V.LIVE_STATUSES), body  # no other spelling
        for outcome in (V.INBOX_INSERTED, V.INBOX_DUPLICATE, V.INBOX_FORGOTTEN):
            assert f"'{outcome}'" in body, outcome
        assert f"visibility = '{V.VISIBILITY_PRIVATE}'" in body and f"'{V.TOKEN_PREFIX}' ||" in body
    sources = f"project, {', '.join(V.PROVENANCE_FIELDS)},"  # a source's columns: the fold links live and held
    assert fold.count(sources) == 4 and remember.count(sources) == 2, fold
    # the rows read by their keys once, then by their ids, each statement over the rows still unfolded
    assert fold.count("coalesce(i.unit_id IS NULL, false) AND i.idempotency_key = ANY (fold_keys)") == 1, fold
    assert fold.count("coalesce(i.unit_id IS NULL, false) AND i.id = ANY (fold_rows)") == 4, fold
    assert fold.count("memory_forgotten_contents") == 3 and remember.count("memory_forgotten_contents") == 1
    assert fold.count("memory_held_by(") == 3 and "memory_held_by" not in remember  # remember() folds at capture
    view = " ".join(conn.execute("SELECT pg_get_viewdef('memory_forgotten_contents')").fetchone()[0].split())
    assert view.count(f"u.status = '{V.STATUS_FORGOTTEN}'::text") == 2, view
    held = " ".join(conn.execute("SELECT pg_get_functiondef('memory_held_by'::regproc)").fetchone()[0].split())
    held_statuses = f"u.status IN {database.sql_list((*V.LIVE_STATUSES, V.STATUS_SUPERSEDED))}"
    assert held_statuses in held and f"u.status = '{V.STATUS_SUPERSEDED}'" in held, held
    assert f"row_visibility = '{V.VISIBILITY_PRIVATE}'" in held, held
    columns = ", ".join(V.INBOX_COLUMNS)
    assert remember.count(columns) == 2, remember  # inserted and selected: the same list
    assert f"SELECT '{V.SWITCH_KILLED}'::text" in remember and f"SELECT '{V.CANON_CHANGED}'::text" in remember
    killed = " ".join(database.query("events/_killed").split("\n", 1)[1].split())
    writes_killed = " ".join(conn.execute("SELECT pg_get_functiondef('memory_writes_killed'::regproc)")
                             .fetchone()[0].split())
    assert killed in writes_killed, killed  # the kill switch as every other read spells it, under the switch's lock
    first, second = V.KILL_SWITCH_LOCK
    assert f"pg_try_advisory_xact_lock_shared({first}, {second})" in writes_killed, writes_killed
    raised = f"RAISE EXCEPTION 'memory is off (the kill switch)' USING ERRCODE = '{V.KILLED_SQLSTATE}'"
    assert remember.count("IF memory_writes_killed() THEN") == remember.count(raised) == 2, remember  # last, both ways
    assert killed in remember, killed  # and first, unlocked: no work where it is on already
    assert conn.execute("SELECT to_regproc('memory_remember')").fetchone()[0] is None  # one write function, no copy

    def between(body: str, start: str, end: str) -> str:
        return body[body.index(start):body.index(end, body.index(start))]

    for start, end in (("INSERT INTO memory_units", " FROM "), ("INSERT INTO memory_sources", " FROM linked")):
        assert between(fold, start, end) == between(remember, start, end), start
    held_link = fold[fold.index("memory_held_by(i.project"):]
    assert between(held_link, "INSERT INTO memory_sources", " FROM linked") == between(
        remember, "INSERT INTO memory_sources", " FROM linked")  # a held row's source is written as any other


def ledger_of(conn, project: str) -> dict[str, list[tuple]]:
    """What a project's writes left in every table they touch, without ids or times: units, sources, inbox rows,
    the ledger's audit rows and the counter."""
    reads = {
        "units": "SELECT number, kind, title, body, status, trust, private_to, created_by, updated_by, "
                 "valid_from = created_at, origin_inbox_id IS NOT NULL FROM memory_units WHERE project = %(p)s "
                 "ORDER BY number",
        "sources": "SELECT u.number, s.feed, s.task_id, s.session_id, s.persona, s.visibility, "
                   "s.created_at = i.received_at FROM memory_sources s JOIN memory_units u ON u.id = s.unit_id "
                   "JOIN memory_inbox i ON i.id = s.inbox_id WHERE s.project = %(p)s ORDER BY s.id",
        "inbox": "SELECT i.outcome, u.number, i.title, i.body, i.paths, i.keywords, i.folded_at IS NOT NULL, "
                 "u.origin_inbox_id = i.id FROM memory_inbox i LEFT JOIN memory_units u ON u.id = i.unit_id "
                 "WHERE i.project = %(p)s ORDER BY i.id",
        "audit": "SELECT actor, action, details FROM audit_log WHERE project = %(p)s AND actor = 'ledger' ORDER BY id",
        "counter": "SELECT memory_last_number(%(p)s), last_number FROM memory_projects WHERE project = %(p)s",
    }
    return {name: conn.execute(sql, {"p": project}).fetchall() for name, sql in reads.items()}


def test_the_one_row_fold_leaves_what_the_set_based_fold_leaves(mem, conn):
    """remember() folds its row with memory_remember_gated's single-row statements, remember_many with memory_fold: the
    same candidates (new, a duplicate that widens a private unit's audience, a replay, forgotten content, a row
    captured unfolded and written again) leave the same units, numbers, sources, inbox rows, audit and counter."""
    def candidates(project: str) -> list[gates.Candidate]:
        fact = {**FACT, "project": project}
        return [gates.validate(**fact, persona="ana", session_id="S-1", visibility="private"),
                gates.validate(**fact, persona="bo", session_id="S-2", task_id="T-2"),
                gates.validate(**fact, persona="bo", session_id="S-2", task_id="T-2"),
                gates.validate(**{**fact, "title": "Port", "body": "The relay listens on 8000."}, task_id="T-3",
                               keywords=["relay"], paths=["docs/relay.md"])]

    def written(project: str, write) -> None:
        rows = candidates(project)
        for candidate in rows:
            write(candidate)
        gone = conn.execute("SELECT number FROM memory_units WHERE project = %s AND title = 'Port'",
                            (project,)).fetchone()[0]
        mem.forget(project, tokens.token_of(gone), authz.Actor.for_project(project, "alice", forget=True))
        write(rows[3])  # a replay of the forgotten unit's own row
        write(dataclasses.replace(rows[3], task_id="T-6"))  # the same content from another task: forgotten
        write(gates.validate(**{**FACT, "project": project, "title": "Port"}, task_id="T-4"))
        late = gates.validate(**{**FACT, "project": project, "title": "Vendor"}, task_id="T-5")
        capture.remember_many(conn, [late], fold_now=False)
        write(late)  # captured unfolded, folded when written again

    written("one-row", lambda c: capture.remember(conn, c))
    written("set-based", lambda c: capture.remember_many(conn, [c]))
    one_row, set_based = ledger_of(conn, "one-row"), ledger_of(conn, "set-based")
    assert one_row == set_based
    assert [outcome for outcome, *_ in one_row["inbox"]] == [V.INBOX_INSERTED, V.INBOX_DUPLICATE, V.INBOX_INSERTED,
                                                            V.INBOX_FORGOTTEN, V.INBOX_INSERTED, V.INBOX_INSERTED]
    assert one_row["inbox"][3][2:6] == ("", "", [], [])  # the forgotten content's text never stays
    assert one_row["units"][0][6] is None  # bo's shared source widened it
    assert one_row["counter"] == [(4, 0)]  # the counter row is locked, never updated: no unit was deleted


# --- Issue #13 -------------------------------------------------------------------------------------------------

FACT = dict(project="acme", kind="env", type="semantic", title="Relay vendor", body="The relay comes from Ostwind.")


AWAITING_BUT_LINKED = "SELECT count(*) FROM memory_inbox WHERE awaits_fold <> (unit_id IS NULL)"


def test_an_inbox_row_awaits_a_fold_exactly_until_a_statement_links_it(mem, conn):
    """The sensor and the daily fold find unfolded rows by awaits_fold (sql/045), which remember() writes false and
    every statement that links a row clears: on every write path the flag says whether the row has its unit (a row
    left unlinked with it false would never be folded)."""
    def awaiting() -> int:
        assert conn.execute(AWAITING_BUT_LINKED).fetchone()[0] == 0
        return conn.execute("SELECT count(*) FROM memory_inbox WHERE awaits_fold").fetchone()[0]

    gone = {**FACT, "title": "Gone", "body": "The relay's spare lives in the north cage."}
    held = mem.remember(**EARLIER, task_id="T-1")
    mem.remember(**EARLIER, task_id="T-2")  # a duplicate
    later = [gates.validate(**EARLIER, task_id="T-3"), gates.validate(**{**FACT, "title": "Vendor"}, task_id="T-4"),
             gates.validate(**{**FACT, "title": "Late"}, task_id="T-5"), gates.validate(**EARLIER, task_id="T-6")]
    keys = capture.remember_many(conn, later, fold_now=False)["to_fold"]
    assert awaiting() == 4
    mem.correct("acme", held.token, body=FACT["body"])
    capture.fold(conn, keys=keys[:2])  # a link to the unit that held the words (T-3), a new unit (T-4)
    assert awaiting() == 2
    mem.remember(**{**FACT, "title": "Late"}, task_id="T-5")  # the replay of a row captured unfolded folds it
    assert awaiting() == 1
    mem.forget("acme", held.token, authz.Actor.for_project("acme", "op", forget=True))  # buries T-6, in its words
    assert awaiting() == 0
    token = mem.remember(**gone, task_id="T-7").token
    mem.forget("acme", token, authz.Actor.for_project("acme", "op", forget=True))
    capture.remember_many(conn, [gates.validate(**gone, task_id="T-8")], fold_now=False)  # buried at its capture
    capture.remember_many(conn, [gates.validate(**gone, task_id="T-9")])  # buried by the set-based fold
    assert mem.remember(**gone, task_id="T-10").reason == V.REASON_FORGOTTEN  # buried by the one-row write
    mem.remember(**{**FACT, "title": "Vendor", "body": "The relay now comes from Nordwind."}, task_id="T-11",
                 supersedes="mem-2")
    assert awaiting() == 0
    outcomes = conn.execute("SELECT outcome, count(*) FROM memory_inbox GROUP BY 1 ORDER BY 1").fetchall()
    assert outcomes == [(V.INBOX_DUPLICATE, 2), (V.INBOX_FORGOTTEN, 4), (V.INBOX_INSERTED, 5)]
    assert units.unfolded_days(conn) == []


def inbox_updates(conn: psycopg.Connection) -> tuple[int, int]:
    """This transaction's updates of inbox rows: those that were HOT (no new index entry), and all of them."""
    return conn.execute("SELECT pg_stat_get_xact_tuples_hot_updated('memory_inbox'::regclass), "
                        "pg_stat_get_xact_tuples_updated('memory_inbox'::regclass)").fetchone()


def test_remembers_link_of_its_own_row_is_a_hot_update(conn):
    """remember() captures its row as awaiting no fold and links it in the same statement: the link changes no
    indexed column, so it adds no heap tuple to the inbox's indexes, and the partial index of rows awaiting a fold
    gets no entry (sql/045: before, every write filed its row in three indexes twice)."""
    with conn.transaction():
        capture.remember(conn, gates.validate(**FACT, task_id="T-1"))
        hot, updated = inbox_updates(conn)
    assert (hot, updated) == (1, 1)
    assert conn.execute("SELECT awaits_fold, unit_id IS NOT NULL FROM memory_inbox").fetchall() == [(False, True)]


def test_a_bulk_write_that_folds_in_its_own_transaction_links_its_rows_in_hot_updates(conn):
    """remember_many folds what it captures in the same transaction, so its rows never await a fold: the fold's
    links change no indexed column (HOT); a capture left to a later fold (the import's) flags its rows."""
    rows = [gates.validate(**{**FACT, "title": f"Relay {i}"}, task_id=f"T-{i}") for i in range(3)]
    with conn.transaction():
        assert capture.remember_many(conn, rows)["inserted"] == 3
        hot, updated = inbox_updates(conn)
    assert (hot, updated) == (3, 3)
    capture.remember_many(conn, [gates.validate(**FACT, task_id="T-9")], fold_now=False)
    flags = conn.execute("SELECT task_id, awaits_fold FROM memory_inbox ORDER BY id").fetchall()
    assert flags == [("T-0", False), ("T-1", False), ("T-2", False), ("T-9", True)]


def test_the_upgrade_flags_the_rows_left_unfolded_and_the_next_writes_fold_as_before(mem, conn, today):
    """A store the release before wrote (no awaits_fold, the partial index on unit_id IS NULL, the functions that
    wrote neither): sql/045 flags the rows still waiting for their fold, and only those, in the transaction that
    applies the functions that clear it, so the sensor and the daily fold find them as before."""
    older = [function_in_migration("memory_fold", "040_folds_judge_each_row_by_its_key_and_capture.sql"),
             function_in_migration("memory_remember_gated",
                                   "041_one_write_function_probes_forgotten_text_only_where_some_was.sql")]
    mem.remember(**FACT, task_id="T-1")
    capture.remember_many(conn, [gates.validate(**{**FACT, "title": "Vendor"}, task_id="T-2")], fold_now=False)
    conn.execute("ALTER TABLE memory_inbox DROP COLUMN awaits_fold")  # the rows as the release before left them
    conn.execute("CREATE INDEX memory_inbox_unfolded_day ON memory_inbox (((received_at AT TIME ZONE 'UTC')::date)) "
                 "WHERE unit_id IS NULL")
    for definition in older:
        conn.execute(definition)
    upgrade = "045_remember_links_its_row_without_a_new_index_entry.sql"
    conn.execute("DELETE FROM schema_migrations WHERE name = %s", (upgrade,))
    assert database.migrate(mem.url) == [upgrade, "functions/memory_fold.sql", "functions/memory_remember_gated.sql"]
    flags = "SELECT task_id, awaits_fold FROM memory_inbox ORDER BY id"
    assert conn.execute(flags).fetchall() == [("T-1", False), ("T-2", True)]
    assert conn.execute("SELECT to_regclass('memory_inbox_unfolded_day')").fetchone() == (None,)
    conn.execute("UPDATE memory_inbox SET received_at = received_at - interval '1 minute'")  # past the grace
    assert [day for day, _ in units.unfolded_days(conn)] == [today]
    assert capture.fold(conn, day=today)["inserted"] == 1
    mem.remember(**{**FACT, "title": "Port"}, task_id="T-3")
    assert conn.execute(flags).fetchall() == [("T-1", False), ("T-2", False), ("T-3", False)]
    assert conn.execute(AWAITING_BUT_LINKED).fetchone()[0] == 0


def test_contributions_without_a_task_stay_distinct_sources(mem, conn):
    """Two task-less contributions of one fact are two sources (provenance and audience kept); a replay adds none."""
    first = mem.remember(**FACT, persona="ana", session_id="S-1", visibility="private")
    assert first.status == "active"
    assert conn.execute("SELECT private_to FROM memory_units").fetchone()[0] == ["ana"]
    second = mem.remember(**FACT, persona="bo", session_id="S-2")
    assert (second.status, second.token) == ("duplicate", first.token)
    assert conn.execute("SELECT private_to FROM memory_units").fetchone()[0] is None  # bo's shared source widened it
    assert mem.remember(**FACT, persona="bo", session_id="S-2").status == "duplicate"  # a replay
    capture.remember_many(conn, [gates.validate(**FACT, persona="bo", session_id="S-2"),
                                 gates.validate(**FACT, persona="cy", feed="mcp")])
    assert source_rows(conn) == [(None, "ana", "private"), (None, "bo", "project"), (None, "cy", "project")]
    assert quality.units_with_wrong_audience(conn) == []
    assert conn.execute("SELECT count(*) FROM memory_inbox").fetchone()[0] == 3


def test_a_rejection_stores_and_logs_no_id_of_the_candidate(mem, conn, caplog):
    """Only the counters (project, feed, reason) reach memory_rejections, audit_log and the log."""
    caplog.set_level(logging.DEBUG)
    ids = dict(task_id="T-secret-task", session_id="S-secret-session", persona="secret-persona",
               source_ref="ref-secret", model="model-secret", observed_sha="abcdef0123")
    result = mem.remember(project="acme", kind="recipe", type="procedural", title="Session recap",
                          body="In this session I worked on the importer.", feed="cli", **ids)
    assert result.reason == V.REASON_SESSION_SUMMARY
    audit = conn.execute("SELECT actor, project, reason, details::text FROM audit_log").fetchall()
    assert audit == [("cli", "acme", V.REASON_SESSION_SUMMARY, '{"feed": "cli", "count": 1}')]
    logged = caplog.text
    for value in ids.values():
        assert value not in logged
    assert "project=acme feed=cli reason=session_summary" in logged


def test_a_candidate_built_by_hand_never_records_a_credential_as_its_project_or_feed(mem, conn):
    """Regression: remember_many took a gates.Candidate built without validate and stored a credential as its
    project (the gate reads the text and the ids; validate reads the project, which the rejection counters keep
    too). The names a write keeps are checked where it enters: a ValidationError naming the field, nothing written."""
    credential = "AKIA" + "IOSFODNN7EXAMPLE"
    for field in ("project", "feed"):
        hand_built = gates.Candidate(**{**FACT, field: credential})
        with pytest.raises(memory_assets.ValidationError) as refused:
            mem.remember_many([gates.validate(**FACT), hand_built])
        assert refused.value.field == field and credential not in str(refused.value)
        with pytest.raises(memory_assets.ValidationError):
            capture.remember(conn, hand_built)
    assert [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in
            ("memory_units", "memory_inbox", "memory_projects", "audit_log", "memory_rejections")] == [0, 0, 0, 0, 0]
    assert mem.remember_many([gates.Candidate(**FACT)])["inserted"] == 1  # a hand-built one with good names is taken


def test_a_valid_from_at_any_offset_python_allows_is_stored_as_its_instant(mem, conn):
    """Regression: an offset past PostgreSQL's 15:59 (Python allows 23:59) reached the database as a
    time-zone error; a time is now kept in UTC, the same instant."""
    at = datetime(2020, 1, 1, tzinfo=timezone(timedelta(hours=23, minutes=59)))
    assert mem.remember(**FACT, valid_from=at).status == "active"
    assert conn.execute("SELECT valid_from FROM memory_units").fetchone()[0] == at


def test_supersedes_must_name_a_unit_of_the_project(mem):
    mem.remember(**FACT)
    for value, message in ((123, "supersedes: must be a token like mem-<n>, got int"),
                           (["mem-1"], "supersedes: must be a token like mem-<n>, got list"),
                           ("mem-x", "supersedes: must be a token like mem-<n>"),
                           ("mem-99", "supersedes: no unit mem-99 in project acme")):
        with pytest.raises(memory_assets.ValidationError) as error:
            mem.remember(**{**FACT, "body": "The relay comes from Nordwind."}, supersedes=value)
        assert str(error.value).startswith(message), value
    assert mem.stats("acme")["units_by_status"] == {"active": 1}


@pytest.mark.parametrize("field", ["confidence", "importance"])
def test_numbers_outside_a_real_are_stored_or_refused_never_a_database_error(mem, conn, field):
    assert mem.remember(**FACT, **{field: 5e-324}).status in ("active", "review")
    assert conn.execute(f"SELECT {field} FROM memory_units").fetchone()[0] == 0.0
    for value in (10**400, float("nan"), float("inf")):
        with pytest.raises(memory_assets.ValidationError) as error:
            mem.remember(**{**FACT, "body": "The relay comes from Nordwind."}, **{field: value})
        assert error.value.field == field


def test_an_out_of_range_valid_from_is_refused_and_the_project_stays_readable(mem):
    for value in (datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
                  datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-14)))):
        with pytest.raises(memory_assets.ValidationError, match="valid_from: must lie between"):
            mem.remember(**FACT, valid_from=value)
    mem.remember(**FACT, valid_from=datetime(1970, 1, 1, tzinfo=UTC))
    assert [h.token for h in mem.recall("acme", "relay vendor Ostwind")] == ["mem-1"]


def test_correct_refuses_a_forgotten_unit(mem, conn):
    token = mem.remember(**FACT).token
    mem.forget("acme", token, authz.Actor.for_project("acme", "op", forget=True), reason="asked")
    with pytest.raises(memory_assets.ValidationError, match=f"token: {token} is forgotten"):
        mem.correct("acme", token, title="Relay vendor again", body="The relay comes from Ostwind, confirmed.")
    assert conn.execute("SELECT title, body, status FROM memory_units").fetchone() == ("", "", "forgotten")


def test_correct_never_takes_another_units_text_live_or_forgotten(mem, conn, stored_text):
    """A correction to the text another live unit holds would make two live units of one content (the database
    refused it with a raw UniqueViolation); to a forgotten unit's text, it would store forgotten text again. Both
    are refused naming the field, and the unit keeps its words."""
    kept = mem.remember(**FACT).token
    other = mem.remember(**{**FACT, "title": "Relay port", "body": "The relay listens on 8000."}).token
    with pytest.raises(memory_assets.ValidationError, match=f"body: {kept} already holds this text"):
        mem.correct("acme", other, title=FACT["title"], body=FACT["body"])
    mem.forget("acme", kept, authz.Actor.for_project("acme", "op", forget=True))
    with pytest.raises(memory_assets.ValidationError, match="body: this text was forgotten in the project"):
        mem.correct("acme", other, title=FACT["title"], body=FACT["body"])
    assert mem.unit("acme", other)["body"] == "The relay listens on 8000." and FACT["body"] not in stored_text()
    assert mem.correct("acme", other, body="The relay listens on port 8000.") == 2  # its own words still change


EARLIER = {**FACT, "body": "The relay is bought from Ostwind GmbH."}  # the words the agents first wrote


def corrected_then_forgotten(mem) -> str:
    """A unit written in EARLIER's words, corrected twice (to FACT's words, then to a third), then forgotten."""
    token = mem.remember(**EARLIER).token
    mem.correct("acme", token, body=FACT["body"])
    mem.correct("acme", token, body="The relay comes from Ostwind, the Kiel plant.")
    mem.forget("acme", token, authz.Actor.for_project("acme", "op", forget=True), reason="asked")
    return token


def test_a_forgotten_units_earlier_wordings_are_never_stored_again(mem, conn, stored_text):
    """Regression (an attacker's pass): a correction replaced the unit's content hash, so a unit corrected and then
    forgotten kept only its last wording's; each earlier one (the agents' first words included) was remembered again
    as a new live unit. Every write path now buries them: remember(), remember_many's fold, and a correction of
    another unit."""
    token = corrected_then_forgotten(mem)
    forgotten = ("rejected", V.INBOX_FORGOTTEN)
    for words in (EARLIER, FACT):  # the first words, then those between the two corrections: the one-row fold
        again = mem.remember(**words, task_id="T-9")
        assert (again.status, again.reason) == forgotten
    folded = capture.remember_many(conn, [gates.validate(**EARLIER, task_id="T-10"),
                                          gates.validate(**FACT, task_id="T-10")])
    assert folded["inserted"] == 0, folded  # the set-based fold
    assert conn.execute("SELECT outcome FROM memory_inbox WHERE task_id = 'T-10'").fetchall() == [
        (V.INBOX_FORGOTTEN,)] * 2
    other = mem.remember(**{**FACT, "title": "Relay port", "body": "The relay listens on 8000."}).token
    for body in (EARLIER["body"], FACT["body"]):
        with pytest.raises(memory_assets.ValidationError, match="body: this text was forgotten in the project"):
            mem.correct("acme", other, title=FACT["title"], body=body)
    assert conn.execute("SELECT count(*) FROM memory_units WHERE status <> 'forgotten'").fetchone()[0] == 1
    assert {row[0] for row in conn.execute("SELECT unit_id FROM memory_inbox WHERE outcome = 'forgotten'")} == {
        mem.unit("acme", token)["id"]}
    text = stored_text()
    assert EARLIER["body"] not in text and FACT["body"] not in text and "Kiel" not in text


def test_every_tombstone_flags_its_project_for_the_writes_forgotten_probe(mem, conn):
    """remember() probes forgotten text only in a project flagged as holding some (sql/041): a forget flags it, as a
    tombstone written by any other statement (an update, an insert) does, and the migration flags the projects whose
    tombstones came before it; a project that never forgot anything stays unflagged, and its writes are stored."""
    def flagged() -> dict[str, bool]:
        return dict(conn.execute("SELECT project, holds_forgotten FROM memory_projects "
                                 "WHERE project IN ('acme', 'quiet', 'other')").fetchall())

    port = {**FACT, "title": "Relay port", "body": "The relay listens on 8000."}
    for project in ("acme", "quiet", "other"):
        mem.remember(**{**port, "project": project})
    assert flagged() == {"acme": False, "quiet": False, "other": False}
    corrected_then_forgotten(mem)
    conn.execute("UPDATE memory_units SET status = 'forgotten', title = '', body = '' WHERE project = 'other'")
    assert flagged() == {"acme": True, "quiet": False, "other": True}
    conn.execute("UPDATE memory_projects SET holds_forgotten = false")  # a store from before the migration
    rerun_migrations_from(conn, "041_one_write_function_probes_forgotten_text_only_where_some_was.sql")
    assert flagged() == {"acme": True, "quiet": False, "other": True}
    conn.execute("INSERT INTO memory_projects (project) VALUES ('restored')")
    conn.execute("INSERT INTO memory_units (project, number, type, kind, title, body, status, confidence, importance, "
                 "trust, content_hash) SELECT 'restored', 1, type, kind, '', '', 'forgotten', confidence, importance, "
                 "trust, content_hash FROM memory_units WHERE project = 'other'")  # a tombstone restored as a row
    assert conn.execute("SELECT holds_forgotten FROM memory_projects WHERE project = 'restored'").fetchone() == (True,)
    for words in (EARLIER, FACT):
        assert mem.remember(**words, task_id="T-9").reason == V.REASON_FORGOTTEN
    assert mem.remember(**{**port, "project": "other"}, task_id="T-9").reason == V.REASON_FORGOTTEN
    assert mem.remember(**{**EARLIER, "project": "quiet"}).status == V.STATUS_ACTIVE
    folded = capture.remember_many(conn, [gates.validate(**{**port, "project": "other"}, task_id="T-10"),
                                          gates.validate(**{**FACT, "project": "quiet"}, task_id="T-10")])
    assert folded["inserted"] == 1, folded  # the set-based fold reads the flag alike
    assert sorted(conn.execute("SELECT project, outcome FROM memory_inbox WHERE task_id = 'T-10'").fetchall()) == [
        ("other", V.INBOX_FORGOTTEN), ("quiet", V.INBOX_INSERTED)]
    conn.execute("UPDATE memory_projects SET holds_forgotten = false WHERE project = 'other'")  # triggers were off
    unguarded = capture.remember_many(conn, [gates.validate(**{**port, "project": "other"}, task_id="T-11")])
    assert unguarded["inserted"] == 1  # the flag is what the fold reads: no_text_in_tombstones reports this project


def test_a_fold_that_waited_for_a_projects_first_forget_buries_its_content(mem, conn, clean):
    """The set-based fold reads holds_forgotten under the counter row's lock, which a forget takes before it
    tombstones: a fold of rows captured earlier that waited for a project's first forget reads the flag that forget
    set, and buries them."""
    def fold(keys: list[str]) -> dict[str, Any]:
        with mem.connection() as folding:
            return capture.fold_captured(folding, keys)

    mem.remember(**FACT)
    row = gates.validate(**FACT, task_id="T-2")
    capture.remember_many(conn, [row], fold_now=False)
    with psycopg.connect(clean, **database.connection_kwargs()) as forgetting, ThreadPoolExecutor(1) as pool:
        with forgetting.transaction():
            forgetting.execute(database.query("lifecycle/hold_folds"), {"project": "acme"})
            forgetting.execute("UPDATE memory_units SET status = 'forgotten', title = '', body = '', keywords = '{}' "
                               "WHERE project = 'acme'")
            folded = pool.submit(fold, [row.idempotency_key])
            until_waiting_on_a_lock(clean)
        assert folded.result(timeout=30)["inserted"] == 0
    assert conn.execute("SELECT outcome FROM memory_inbox WHERE task_id = 'T-2'").fetchone() == (V.INBOX_FORGOTTEN,)


@pytest.mark.parametrize("revival_commits", [True, False])
def test_a_fold_links_a_row_to_a_unit_a_writer_without_the_counter_row_made_live_meanwhile(mem, conn, clean,
                                                                                          revival_commits):
    """The set-based fold's insert has no ON CONFLICT: a unit made live by a write that takes no counter row (a week's
    summary revived, an operator's UPDATE) and committed while the fold's insert waited for it fails that insert on
    the live-content index, so the fold tries again and links the row to that unit as its duplicate, numbering the
    rows around it without a gap (ON CONFLICT had numbered the row it skipped); where that write rolls back, the row
    becomes a unit as it would have."""
    def fold(keys: list[str]) -> dict[str, Any]:
        with mem.connection() as folding:
            return capture.fold_captured(folding, keys)

    mem.remember(**FACT)
    conn.execute("UPDATE memory_units SET status = %s WHERE project = 'acme'", (V.STATUS_RETIRED,))
    rows = [gates.validate(**{**FACT, "title": "Before", "body": "The relay ships on Mondays."}, task_id="T-2"),
            gates.validate(**FACT, task_id="T-2"),
            gates.validate(**{**FACT, "title": "After", "body": "The relay ships from Hamburg."}, task_id="T-2")]
    capture.remember_many(conn, rows, fold_now=False)
    with psycopg.connect(clean, **database.connection_kwargs()) as reviving, ThreadPoolExecutor(1) as pool:
        with reviving.transaction(force_rollback=not revival_commits):
            reviving.execute("UPDATE memory_units SET status = %s WHERE project = 'acme'", (V.STATUS_ACTIVE,))
            folded = pool.submit(fold, [row.idempotency_key for row in rows])
            until_waiting_on_a_lock(clean)  # the fold's insert, on the revived unit's entry in the live index
        assert folded.result(timeout=30)["inserted"] == (2 if revival_commits else 3)
    linked = conn.execute("SELECT u.title, i.outcome, u.number FROM memory_inbox i JOIN memory_units u ON u.id = "
                          "i.unit_id WHERE i.task_id = 'T-2' ORDER BY i.id").fetchall()
    assert linked == ([("Before", V.INBOX_INSERTED, 2), (FACT["title"], V.INBOX_DUPLICATE, 1),
                       ("After", V.INBOX_INSERTED, 3)] if revival_commits else
                      [("Before", V.INBOX_INSERTED, 2), (FACT["title"], V.INBOX_INSERTED, 3),
                       ("After", V.INBOX_INSERTED, 4)])


def test_a_fold_tries_again_after_each_of_several_revivals_committed_while_it_waited(mem, conn, clean):
    """Four units made live one after another by four writers that take no counter row, each committed while the
    fold's insert waited for it: the fold tries again after each (as many times as it has rows), links each row to
    its revived unit and numbers the new one after them, where a bound of three tries failed it."""
    contents = [{**FACT, "title": f"Leg {i}", "body": f"The relay's leg {i} runs through depot {i}."} for i in range(4)]
    for content in contents:
        mem.remember(**content)
    conn.execute("UPDATE memory_units SET status = %s WHERE project = 'acme'", (V.STATUS_RETIRED,))
    rows = [gates.validate(**content, task_id="T-2") for content in contents]
    last = {**FACT, "title": "Last", "body": "The relay's last leg ends in Kiel."}
    rows.append(gates.validate(**last, task_id="T-2"))
    capture.remember_many(conn, rows, fold_now=False)
    with contextlib.ExitStack() as stack, ThreadPoolExecutor(1) as pool:
        revivals = [stack.enter_context(psycopg.connect(clean, **database.connection_kwargs())) for _ in contents]
        xids = []
        for revival, content in zip(revivals, contents, strict=True):
            revival.autocommit = False
            revival.execute("UPDATE memory_units SET status = %s WHERE project = 'acme' AND title = %s",
                            (V.STATUS_ACTIVE, content["title"]))
            xids.append(str(revival.execute("SELECT pg_current_xact_id()").fetchone()[0]))

        def fold() -> dict[str, Any]:
            with mem.connection() as folding:
                return capture.fold_captured(folding, [row.idempotency_key for row in rows])

        folded = pool.submit(fold)
        for revival, xid in zip(revivals, xids, strict=True):
            until_waiting_on_a_lock(clean, transaction=xid)  # the fold's insert, on this revival's live entry
            revival.commit()
        assert folded.result(timeout=30)["inserted"] == 1
    linked = conn.execute("SELECT u.title, i.outcome, u.number FROM memory_inbox i JOIN memory_units u ON u.id = "
                          "i.unit_id WHERE i.task_id = 'T-2' ORDER BY i.id").fetchall()
    assert linked == [(f"Leg {i}", V.INBOX_DUPLICATE, i + 1) for i in range(4)] + [("Last", V.INBOX_INSERTED, 5)]


@pytest.mark.parametrize("meanwhile", ["revived", "numbered"])
def test_a_fold_whose_snapshot_cannot_see_what_was_committed_since_asks_for_a_retry_naming_no_content(mem, conn, clean,
                                                                                                  meanwhile):
    """In a caller's REPEATABLE READ transaction the fold never sees a unit made live, or a number taken, after the
    transaction's snapshot: the fold raises a serialization failure, as ON CONFLICT did, whose message names no
    content (a unique violation's detail names the content's hash, or the number), and leaves the row to fold."""
    mem.remember(**FACT)
    conn.execute("UPDATE memory_units SET status = %s WHERE project = 'acme'", (V.STATUS_RETIRED,))
    row = gates.validate(**FACT, task_id="T-2") if meanwhile == "revived" else gates.validate(
        **{**FACT, "title": "Depot", "body": "The relay waits in the Bremen depot."}, task_id="T-2")
    capture.remember_many(conn, [row], fold_now=False)
    with psycopg.connect(clean, **database.connection_kwargs()) as folding:
        folding.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        with pytest.raises(psycopg.errors.SerializationFailure) as raised, folding.transaction():
            folding.execute("SELECT count(*) FROM memory_units")  # the transaction's snapshot, taken here
            if meanwhile == "revived":
                conn.execute("UPDATE memory_units SET status = %s WHERE project = 'acme'", (V.STATUS_ACTIVE,))
            else:  # mem-2, committed after the snapshot, which still reads mem-1 as the project's last number
                assert mem.remember(**{**FACT, "title": "Route", "body": "The relay goes by rail."}).token == "mem-2"
            folding.execute(database.query("ledger/fold"), {"keys": [row.idempotency_key], "trust": 0.5})
    error = raised.value.diag
    assert row.content_hash not in f"{error.message_primary} {error.message_detail}"
    assert conn.execute("SELECT unit_id FROM memory_inbox WHERE task_id = 'T-2'").fetchone() == (None,)


def test_a_forget_buries_rows_waiting_to_fold_in_an_earlier_wording(mem, conn, stored_text):
    """A row captured unfolded in words the unit held before a correction is blanked by the forget at once, as a
    row in its last words is: no text of the forgotten fact waits in the inbox for a fold."""
    token = mem.remember(**EARLIER).token
    mem.correct("acme", token, body=FACT["body"])
    capture.remember_many(conn, [gates.validate(**EARLIER, task_id="T-2")], fold_now=False)
    mem.forget("acme", token, authz.Actor.for_project("acme", "op", forget=True))
    assert conn.execute("SELECT count(*) FROM memory_inbox WHERE unit_id IS NULL").fetchone()[0] == 0
    assert EARLIER["body"] not in stored_text()


def test_the_migration_keeps_the_earlier_wordings_the_inbox_knows(mem, conn):
    """Units corrected before sql/037 have no former wordings recorded; the migration takes each from the inbox
    rows folded into a unit whose content has changed since, so forgetting such a unit buries its first words."""
    token = mem.remember(**EARLIER).token
    mem.correct("acme", token, body=FACT["body"])
    conn.execute("DELETE FROM memory_former_wordings")  # as a store corrected before the migration
    rerun_migrations_from(conn, "037_forgotten_wordings_stay_forgotten.sql")
    conn.commit()
    mem.forget("acme", token, authz.Actor.for_project("acme", "op", forget=True))
    assert mem.remember(**EARLIER, task_id="T-9").reason == V.INBOX_FORGOTTEN


def test_a_forget_takes_every_unit_holding_the_text_in_any_wording_it_held(mem, conn, stored_text):
    """Regression (an attacker's pass): a forget tombstoned the unit alone, so its text lived on in another unit
    that held it: one written in the unit's earlier words after a correction (recalled, and every later write of
    those words linked to it), or a superseded unit of the same words (served as_of). Both go with the forget now,
    audited as derived from it, and the tombstone check stays clean."""
    token = mem.remember(**EARLIER).token
    mem.correct("acme", token, body=FACT["body"])
    again = mem.remember(**EARLIER, task_id="T-2")  # the first words are no unit's live text now: a new unit
    assert again.status == "active" and again.token != token
    old = mem.remember(project="acme", kind="env", type="semantic", title="Port", body="The relay listens on 8000.")
    new = mem.remember(project="acme", kind="env", type="semantic", title="Port", body="The relay listens on 8080.",
                       supersedes=old.token)
    mem.correct("acme", new.token, body="The relay listens on 8000.")  # the superseded unit's words, live again
    operator = authz.Actor.for_project("acme", "op", forget=True)
    for forgotten in (token, new.token):
        mem.forget("acme", forgotten, operator, reason="asked")
    statuses = dict(conn.execute("SELECT number, status FROM memory_units").fetchall())
    assert set(statuses.values()) == {V.STATUS_FORGOTTEN}, statuses
    assert conn.execute("SELECT count(*) FROM audit_log WHERE action = 'forget' AND details ? 'derived_from'"
                        ).fetchone()[0] == 2
    assert quality.tombstones_with_text(conn) == []
    text = stored_text()
    assert all(words not in text for words in (EARLIER["body"], FACT["body"], "listens on"))


def test_a_correction_racing_a_forget_never_takes_the_forgotten_units_earlier_words(mem, clean, stored_text):
    """Regression (a review): a correction took no lock a forget holds, so one landing while a forget was in flight
    probed before the tombstone committed and took the forgotten unit's earlier words, which no index keeps from
    two units (its last words the live-content index does). A correction now holds the project's counter row, as
    the forget does before it tombstones: it waits for the forget and is refused."""
    token = mem.remember(**EARLIER).token
    mem.correct("acme", token, body=FACT["body"])
    other = mem.remember(project="acme", kind="env", type="semantic", title="Relay port",
                         body="The relay listens on 8000.").token
    results: dict[str, Any] = {}

    def run(name: str, call) -> threading.Thread:
        def target() -> None:
            try:
                results[name] = call()
            except Exception as error:  # the outcome under test
                results[name] = error
        thread = threading.Thread(target=target)
        thread.start()
        return thread

    mem.compile_bundle("acme")  # a stored revision lists the unit: the forget's scrub updates it
    with psycopg.connect(clean) as holder:  # holds that revision: the forget stops there, its tombstone uncommitted
        assert holder.execute("SELECT revision FROM memory_bundles WHERE project = 'acme' FOR UPDATE").fetchall()
        forget = run("forget", lambda: mem.forget("acme", token, authz.Actor.for_project("acme", "op", forget=True)))
        until_waiting_on_a_lock(clean)
        correction = run("correct", lambda: mem.correct("acme", other, title=EARLIER["title"], body=EARLIER["body"]))
        until_waiting_on_a_lock(clean, backends=2)  # the correction waits for the forget's counter row
        holder.rollback()
    forget.join(timeout=30)
    correction.join(timeout=30)
    assert isinstance(results["correct"], memory_assets.ValidationError), results
    assert str(results["correct"]) == "body: this text was forgotten in the project and is not stored again"
    assert EARLIER["body"] not in stored_text()


def test_rows_captured_to_fold_later_hold_no_forgotten_text(mem, conn, stored_text):
    """Regression (an attacker's pass): a capture that folds later (remember_many(fold_now=False), the import's
    --no-fold) kept forgotten text in the inbox until a fold buried it. It is buried as it is captured, in the
    unit's last words and its earlier ones alike."""
    corrected_then_forgotten(mem)
    captured = capture.remember_many(conn, [gates.validate(**EARLIER, task_id="T-2"),
                                           gates.validate(**FACT, task_id="T-2")], fold_now=False)
    assert captured["captured"] == 2
    assert conn.execute("SELECT outcome, title, body FROM memory_inbox WHERE task_id = 'T-2'").fetchall() == [
        (V.INBOX_FORGOTTEN, "", "")] * 2
    assert EARLIER["body"] not in stored_text() and FACT["body"] not in stored_text()
    assert capture.fold(conn, keys=captured["to_fold"])["inserted"] == 0


def test_the_migration_tombstones_what_earlier_forgets_left_holding_the_text(mem, conn, stored_text):
    """A store forgotten before sql/037 may hold a unit written in a forgotten unit's earlier words after its
    correction; the migration tombstones it, as sql/010 repaired derived text, blanks its inbox rows and takes it
    out of the stored bundles."""
    token = mem.remember(**EARLIER).token
    mem.correct("acme", token, body=FACT["body"])
    mem.forget("acme", token, authz.Actor.for_project("acme", "op", forget=True))
    conn.execute("DELETE FROM memory_former_wordings")  # the store as the old forget left it: the first words
    conn.commit()
    assert mem.remember(**EARLIER, task_id="T-2").status == "active"  # stored again, as they were then
    assert [u["title"] for u in mem.compile_bundle("acme")["units"]] == [EARLIER["title"]]
    rerun_migrations_from(conn, "037_forgotten_wordings_stay_forgotten.sql")
    conn.commit()
    assert conn.execute("SELECT count(*) FROM memory_units WHERE status <> 'forgotten'").fetchone()[0] == 0
    assert EARLIER["body"] not in stored_text() and quality.tombstones_with_text(conn) == []
    assert conn.execute("SELECT count(*) FROM memory_bundles WHERE units > 0").fetchone()[0] == 0


def test_two_corrections_of_different_fields_at_once_both_land(mem, conn, monkeypatch):
    """Regression (an attacker's pass): a correction filled the fields it leaves from a read taken before its
    transaction, so one landing between that read and its write was undone (18 of 20 concurrent pairs lost one).
    It now writes only over the revision it read, else reads and gates again."""
    token = mem.remember(**FACT).token
    real_unit = capture.units.unit_row
    raced = []

    def read_then_another_correction_lands(connection, project, unit_token):
        row = real_unit(connection, project, unit_token)
        if not raced:
            raced.append(None)
            fixed_body = "The relay comes from Ostwind since 2025 (fixed body)."
            raced[0] = capture.correct(conn, "acme", token, body=fixed_body)
        return row

    monkeypatch.setattr(capture.units, "unit_row", read_then_another_correction_lands)
    assert mem.correct("acme", token, title="Relay vendor (fixed title)") == 3
    assert raced == [2]
    assert conn.execute("SELECT title, body, revision FROM memory_units").fetchone() == (
        "Relay vendor (fixed title)", "The relay comes from Ostwind since 2025 (fixed body).", 3)


def test_remember_many_gates_every_candidate_before_its_transaction(conn, monkeypatch):
    """No gate runs while the bulk write holds a transaction (and the row locks a fold takes)."""
    states = []
    real_gate = gates.gate

    def watched_gate(candidate, canon=None):
        states.append(conn.info.transaction_status)
        return real_gate(candidate, canon)

    monkeypatch.setattr(gates, "gate", watched_gate)
    rows = [gates.validate(**{**FACT, "title": f"Relay vendor {i}"}, task_id=f"T-{i}") for i in range(3)]
    rows.append(gates.validate(**EXCLUSION_CASES[0][1], project="acme", type="semantic", title="t"))
    counts = capture.remember_many(conn, rows)
    assert (counts["captured"], counts["rejected"]) == (3, {V.REASON_DECISION_KIND: 1})
    assert states == [psycopg.pq.TransactionStatus.IDLE] * 4


def test_a_quadratic_source_text_gates_in_bounded_time_outside_the_transaction(mem):
    """A 20k-character source of the kind difflib's alignment is quadratic on (18 s here; 102 s in the issue's
    case, inside the import transaction) gates at once."""
    draw = random.Random(13)
    body = "".join(draw.choice("ab") for _ in range(V.BODY_MAX_CHARS))
    source = "".join(draw.choice("ab") for _ in range(20_000))
    started = time.perf_counter()
    result = mem.remember(project="acme", kind="recipe", type="procedural", title="Alternation", body=body,
                          source_text=source)
    assert time.perf_counter() - started < 5
    assert result.reason == V.REASON_VERBATIM_FILE_TEXT


def test_worker_processes_gate_a_batch_as_this_process_does(conn):
    """remember_many's parallel gates (issue #15: the import gates in one process per core) give every candidate
    the verdict the serial gates give, in order, secrets and exclusions included."""
    rows = [gates.validate(project="acme", kind="env", type="semantic", title=f"Service {i} port",
                           body=f"Service {i} listens on port {8000 + i} because the proxy maps it.", task_id=f"T-{i}")
            for i in range(V.GATE_PROCESS_MIN_BATCH + 40)]
    for i, (_, text, _) in enumerate(SECRETS):
        rows[7 * i] = gates.validate(project="acme", kind="env", type="semantic", title=f"Key {i}",
                                     body=f"Deploy with {text} on staging.", task_id=f"S-{i}")
    rows[5] = gates.validate(**EXCLUSION_CASES[2][1], project="acme", type="semantic", title="t")
    serial = capture.gate_soon(conn, rows, workers=1).verdicts()
    assert capture.gate_soon(conn, rows, workers=2).verdicts() == serial
    assert serial.count(V.REASON_SECRET) == len(SECRETS) and serial[5] == V.REASON_TASK_STATE
    counts = capture.remember_many(conn, rows, gate_workers=2)
    assert counts["captured"] == counts["inserted"] == len(rows) - len(SECRETS) - 1
    assert counts["rejected"] == {V.REASON_SECRET: len(SECRETS), V.REASON_TASK_STATE: 1}
    assert conn.execute("SELECT sum(count) FROM memory_rejections").fetchone()[0] == len(SECRETS) + 1


WRITE_TABLES = ("memory_units", "memory_inbox", "memory_sources", "audit_log")


def table_reads(conn: psycopg.Connection) -> dict[str, tuple[int, int]]:
    """Per table of the write path, this transaction's (sequential scans, rows read by scans and index fetches)."""
    return {name: (seq, rows) for name, seq, rows in conn.execute(
        "SELECT relname, seq_scan, seq_tup_read + coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables "
        "WHERE relname = ANY (%s)", (list(WRITE_TABLES),))}


def unfolded_index_scans(conn: psycopg.Connection) -> int:
    """This transaction's scans of the partial index of inbox rows awaiting a fold (full of dead entries: a write that
    filters its keys over it slows with the store's history), by this backend alone, as table_reads counts."""
    return conn.execute("SELECT pg_stat_get_xact_numscans('memory_inbox_awaiting_fold'::regclass)").fetchone()[0]


@contextlib.contextmanager
def reads(conn: psycopg.Connection) -> Iterator[dict[str, Any]]:
    """What the writes in the block read, filled in when it ends: per table of the write path (sequential scans,
    rows read), counted in one transaction by this backend alone (the cumulative view also holds what other
    backends flush meanwhile: a full run once saw 1,009 reads there), and the scans of the unfolded rows' index."""
    counts: dict[str, Any] = {}
    with conn.transaction():
        start, scans = table_reads(conn), unfolded_index_scans(conn)
        yield counts
        end, scanned = table_reads(conn), unfolded_index_scans(conn)
    for table in WRITE_TABLES:
        (seq_before, rows_before), (seq_after, rows_after) = start.get(table, (0, 0)), end.get(table, (0, 0))
        counts[table] = (seq_after - seq_before, rows_after - rows_before)
    counts["unfolded_day_index_scans"] = scanned - scans


@pytest.mark.parametrize("analysed", [False, True])
def test_one_write_reads_no_whole_table_however_large_the_store(conn, analysed):
    """A write's statements and triggers probe indexes: the audience trigger once read every unit of the store for
    one added source, the fold filtered its keys over the partial index of unfolded rows, which keeps a dead
    entry per past fold (remember() took 16 ms at 30k units written, 3 ms fresh), the fold's content probes
    read every live unit of the project through (project, status) until the store was analysed (remember() went
    from 3.7 to 8.6 ms as one project grew to 4,000 units), and once it was analysed (autovacuum, in a full test
    run), remember_many's capture read that partial index whole for an empty list of replay keys. The forgotten
    probe read every unit of the project by (project, number) where the statistics said each project had one unit
    (left by tests/test_curation.py when it ran first)."""
    capture.remember_many(conn, [gates.validate(project="acme" if i % 5 == 0 else f"other-{i % 5}", kind="env",
                                                type="semantic", title=f"Service {i} port",
                                                body=f"Service {i} listens on {i}.")
                                 for i in range(5000)])  # unanalysed: a store that grew since its last analysis
    if analysed:
        conn.execute("ANALYZE memory_inbox, memory_units")
    with reads(conn) as widening:
        for i, visibility in enumerate(("private", "project")):  # the second widens the first
            capture.remember_many(conn, [gates.validate(**FACT, task_id=f"T-{i}", persona="ana",
                                                        visibility=visibility)])
    assert all(widening[t][0] == 0 and widening[t][1] <= 20 for t in WRITE_TABLES), widening  # probes, not reads
    assert widening["unfolded_day_index_scans"] == 0, widening
    with reads(conn) as nothing_to_fold:
        assert capture.fold_captured(conn, []) == {"inserted": 0, "refused": {}}
    assert nothing_to_fold["unfolded_day_index_scans"] == 0, nothing_to_fold
    for i in range(7):  # remember(): the session's generic plans of the same fold (past psycopg's prepare threshold)
        assert capture.remember(conn, gates.validate(**FACT, task_id=f"T-{i + 2}")).status == V.OUTCOME_DUPLICATE
    with reads(conn) as replays:
        assert capture.remember(conn, gates.validate(**FACT, task_id="T-9")).status == V.OUTCOME_DUPLICATE
    assert replays["unfolded_day_index_scans"] == 0, replays
    assert all(replays[t][0] == 0 and replays[t][1] <= 10 for t in WRITE_TABLES), replays


def test_a_fold_looks_each_rows_unit_up_by_its_key_whatever_the_statistics_say(analysed_by_refreshes_only):
    """Regression: on a store analysed when no unit was live (analysed young, or when its units were superseded), the
    fold's link of rows to their units read every live unit and searched the batch's keys for each: 2,000 rows
    beside 3,000 live units the statistics had not seen took 8.8 s. Each row's unit and tombstone are looked up by
    the row's key."""
    conn = analysed_by_refreshes_only

    def batch(prefix: str, n: int) -> list[gates.Candidate]:
        return [gates.validate(project="acme", kind="env", type="semantic", title=f"{prefix} port {i}",
                               body=f"The {prefix} service {i} listens on port {i}.", task_id=f"{prefix}-{i}")
                for i in range(n)]

    capture.remember_many(conn, batch("old", 200))
    conn.execute("UPDATE memory_units SET status = 'superseded', valid_until = now()")
    conn.execute("ANALYZE memory_units, memory_inbox")  # no unit live, say the statistics
    capture.remember_many(conn, batch("live", 400))  # 400 live units they have not seen
    captured = capture.remember_many(conn, batch("new", 200) + batch("live", 200)[:100], fold_now=False)
    with reads(conn) as folding:
        assert capture.fold(conn, keys=captured["to_fold"])["inserted"] == 200
    # each of the 300 rows reads its own row and its unit by key: never every live unit, nor the batch per unit
    assert folding["memory_units"][0] == 0 and folding["memory_units"][1] <= 4 * 300, folding
    assert folding["memory_inbox"][0] == 0 and folding["memory_inbox"][1] <= 6 * 300, folding


@pytest.fixture
def unanalysed(clean):
    """A connection to a new database on the same server, migrated and never analysed (the tests' own database
    keeps the statistics of earlier tests through TRUNCATE); dropped afterwards."""
    name = f"fresh_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(clean, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = database.with_database(clean, name)
    database.migrate(url)
    with psycopg.connect(url, **database.connection_kwargs()) as connection:
        yield connection
    with psycopg.connect(clean, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_a_connection_that_wrote_to_a_small_store_reads_no_whole_table_once_it_grew(unanalysed):
    """A session keeps its plans of the fold, made on the tables as they were, whichever path made them: prepared on
    small tables without statistics, the plans scanned memory_units and memory_inbox whole (3.7 to 8.6 ms a call as
    one project grew to 4,000 units); with sequential scans off the fold's content probes still read every live
    unit of the store per write (1.7 to 4.1 ms a call over 5,000 writes); and plans that a bulk fold made without
    those settings served remember() later (memory_inbox read whole, three times per write)."""
    conn = unanalysed
    for i in range(16):  # past the prepare thresholds, the plans made on tables of a few rows: bulk folds first
        fact = gates.validate(project="acme", kind="env", type="semantic", title="Relay", body=f"Relay {i} is up.")
        if i < 8:  # they make the session's plans of memory_fold, which remember() then shares
            assert capture.remember_many(conn, [fact])["inserted"] == 1
        else:
            assert capture.remember(conn, fact).token == f"{V.TOKEN_PREFIX}{i + 1}"
    for i in range(2000):  # the store grows under the same plans (a bulk write may trigger an ANALYZE: replanned)
        capture.remember(conn, gates.validate(project="acme", kind="env", type="semantic", title="Relay",
                                              body=f"Relay {i} is down."))

    with reads(conn) as counts:
        for i in range(2):
            result = capture.remember(conn, gates.validate(project="acme", kind="env", type="semantic",
                                                           title="Relay port", body=f"The relay listens on {i}.",
                                                           task_id=f"U-{i}", persona="ana", visibility="private"))
            assert result.status == V.STATUS_ACTIVE and result.token == f"{V.TOKEN_PREFIX}{2017 + i}", result
    assert all(counts[t][0] == 0 for t in WRITE_TABLES), counts  # no whole read
    assert all(counts[t][1] <= 20 for t in WRITE_TABLES), counts  # a few rows, not 2,008


def test_a_session_that_first_writes_to_a_young_store_past_its_first_units_reads_by_key(unanalysed):
    """A session plans the write's live probe on the units as they are at its first write: on a young store that no
    ANALYZE has read, past ~100 units (the live-content btree a level deeper than the one of numbers) the planner
    read by (project, number), every unit of the project per write, until autovacuum's first ANALYZE; a project's
    50th unit has the store analysed first (docs/scaling.md item 50)."""
    def fact(i: int) -> gates.Candidate:
        return gates.validate(project="acme", kind="env", type="semantic", title="Relay", body=f"Relay {i} is up.")

    unanalysed.execute("ALTER TABLE memory_units SET (autovacuum_enabled = false)")  # its nap could come first
    for i in range(150):
        capture.remember(unanalysed, fact(i))
    with psycopg.connect(unanalysed.info.dsn, **database.connection_kwargs()) as later:
        for i in range(150, 450):  # its plans made at the first
            capture.remember(later, fact(i))
        with reads(later) as counts:
            assert capture.remember(later, fact(999)).token == f"{V.TOKEN_PREFIX}451"
    assert counts["memory_units"][1] <= 20, counts  # a few rows, not 450


def gate_in_worker_processes_and_return() -> None:
    """What a spawned process runs: gate a candidate in the worker processes, then end."""
    candidate = gates.validate(project="acme", kind="env", type="semantic", title="Port", body="It listens on 8000.")
    assert capture._gate_pool(2).submit(capture._gate_chunk, [(candidate, [])]).result() == [None]


def test_a_process_that_multiprocessing_started_exits_after_gating_in_worker_processes():
    """multiprocessing joins its children at exit before the gate pool's own exit hook would stop them: without
    the pool's finaliser a `make bench` part that imported in parallel never ended."""
    child = multiprocessing.get_context("spawn").Process(target=gate_in_worker_processes_and_return)
    child.start()
    child.join(60)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive and child.exitcode == 0


def test_fold_takes_a_day_or_keys_and_folds_only_those(conn, today):
    rows = [gates.validate(**{**FACT, "title": f"Relay vendor {i}"}, task_id=f"T-{i}") for i in range(3)]
    assert capture.remember_many(conn, rows, fold_now=False)["inserted"] == 0
    assert capture.fold(conn, keys=[rows[0].idempotency_key])["inserted"] == 1
    assert capture.fold(conn, day=today - timedelta(days=1))["inserted"] == 0
    assert capture.fold(conn, day=today)["inserted"] == 2
    assert conn.execute("SELECT array_agg(number ORDER BY number) FROM memory_units").fetchone()[0] == [1, 2, 3]
    with pytest.raises(TypeError):
        capture.fold(conn)


def test_a_resent_write_reports_a_replay_of_its_own_key_as_the_write_it_was(conn):
    """remember() sends a write again when its connection broke before the server answered, and the server may have
    committed it by then: that replay of its own key is the write it was, where any other replay is a duplicate."""
    fact = gates.validate(**FACT)
    first = capture.remember(conn, fact)
    assert first.status == V.STATUS_ACTIVE
    assert capture.remember(conn, fact).status == V.OUTCOME_DUPLICATE
    assert capture.remember(conn, fact, resent=True) == first
    again = capture.remember(conn, gates.validate(**FACT, task_id="T-2"), resent=True)  # another key, same text
    assert (again.status, again.token) == (V.OUTCOME_DUPLICATE, first.token)


def test_a_fold_of_no_keys_sends_no_fold(conn, today):
    """An empty key list is a constant false, which lets the planner read a partial index whole (remember_many's
    capture did, test above): a fold with no keys, given or found for the day, sends no fold statement."""
    assert round_trips(conn, lambda: capture.fold(conn, keys=[])) == (0, 0)
    assert round_trips(conn, lambda: capture.fold(conn, day=today)) == (3, 3)  # and the day's unfolded keys
    assert capture.fold(conn, keys=[]) == {"inserted": 0, "linked": 0, "forgotten": 0, "projects": 0}


def test_fold_captured_counts_the_new_units_of_its_rows_whichever_fold_took_them(conn, today):
    """A caller folding what it captured to fold later may find the inbox sensor folded some of its rows first: the
    count is of the batch's rows that became new units, not of what this fold did. A replay of a folded row waits for
    no fold; a replay of a row captured and never folded (a writer stopped between the two) does."""
    rows = [gates.validate(**{**FACT, "title": f"Relay vendor {i}"}, task_id=f"T-{i}") for i in range(5)]
    keys = [r.idempotency_key for r in rows]
    first = capture.remember_many(conn, rows[:3], fold_now=False)
    assert (first["captured"], first["to_fold"]) == (3, keys[:3])
    assert capture.fold(conn, keys=keys[:2])["inserted"] == 2  # the sensor, meanwhile
    assert capture.fold_captured(conn, first["to_fold"]) == {"inserted": 3, "refused": {}}
    assert capture.remember_many(conn, [rows[4]], fold_now=False)["to_fold"] == keys[4:]  # never folded
    again = capture.remember_many(conn, rows, fold_now=False)
    assert (again["captured"], sorted(again["to_fold"])) == (1, sorted(keys[3:]))
    duplicate = capture.remember_many(conn, [gates.validate(**{**FACT, "title": "Relay vendor 0"}, task_id="T-9")],
                                      fold_now=False)["to_fold"]
    assert capture.fold_captured(conn, again["to_fold"] + duplicate) == {"inserted": 2, "refused": {}}
    assert conn.execute("SELECT count(*) FROM memory_units").fetchone()[0] == 5


def test_fold_captured_counts_its_new_units_for_another_connections_check_at_once(conn, clean):
    """The import checks the statistics on another connection while its last batch folds: each fold's counters are
    flushed as it ends (a backend otherwise sends them at most once a second), so no check misses a fold, and none
    arrives after the ANALYZE to make the table look changed again."""
    inserted = "SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'memory_units'"
    batches = [[gates.validate(**{**FACT, "title": f"Relay vendor {b}-{i}"}, task_id=f"T-{b}-{i}") for i in range(20)]
               for b in range(2)]
    keys = [capture.remember_many(conn, batch, fold_now=False)["to_fold"] for batch in batches]
    conn.execute("SELECT pg_stat_force_next_flush()")  # just flushed: the folds' counters would wait a second
    with psycopg.connect(clean, autocommit=True) as other:
        before = other.execute(inserted).fetchone()[0]
        assert capture.fold_captured(conn, keys[0])["inserted"] == 20
        assert capture.fold_captured(conn, keys[1])["inserted"] == 20
        assert other.execute(inserted).fetchone()[0] >= before + 40


def test_fold_captured_drops_a_row_the_database_refuses_and_folds_the_rest(conn, today):
    """Should a row pass validation and its unit be refused by the database, the batch's fold is undone, each row
    folded alone, and the refused one dropped from the inbox: left there, it would fail every fold of its day."""
    rows = [gates.validate(**{**FACT, "title": f"Relay vendor {i}"}, task_id=f"T-{i}") for i in range(3)]
    rows[1] = dataclasses.replace(rows[1], title="x" * 81)  # past validation; the units' CHECK refuses it
    keys = capture.remember_many(conn, rows, fold_now=False)["to_fold"]
    assert capture.fold_captured(conn, keys) == {"inserted": 2, "refused": {rows[1].idempotency_key: "CheckViolation"}}
    assert conn.execute("SELECT count(*) FROM memory_inbox WHERE unit_id IS NULL").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM memory_inbox").fetchone()[0] == 2
    assert capture.fold(conn, day=today)["inserted"] == 0
    assert conn.execute("SELECT project, feed, reason, count FROM memory_rejections").fetchall() == [
        ("acme", rows[1].feed, V.REASON_REFUSED_BY_DATABASE, 1)]  # counted, its text not kept
    assert conn.execute("SELECT actor, project, reason, details FROM audit_log WHERE action = 'reject'").fetchall() == [
        (rows[1].feed, "acme", V.REASON_REFUSED_BY_DATABASE, {"feed": rows[1].feed, "count": 1})]  # as any rejection


def test_remember_many_leaves_out_the_rows_the_database_refuses_and_writes_the_rest_in_one_transaction(
        conn, stored_text):
    """A row past validation that the database refuses, at its capture (the inbox's CHECK) or at its fold (the
    units' CHECK), is left out in savepoints of the batch's one transaction: the rest is written, the refused keys
    come back with the error's class, each is counted as a rejection, and neither text is kept."""
    rows = [gates.validate(**{**FACT, "title": f"Relay vendor {i}"}, task_id=f"T-{i}") for i in range(4)]
    rows[1] = dataclasses.replace(rows[1], visibility="everyone", title="zqcapture")  # the inbox's CHECK refuses it
    rows[2] = dataclasses.replace(rows[2], title="zqfold " + "x" * 80)  # the units' CHECK refuses it
    counts = capture.remember_many(conn, rows)
    assert (counts["captured"], counts["inserted"]) == (2, 2)
    assert counts["refused"] == {rows[1].idempotency_key: "CheckViolation", rows[2].idempotency_key: "CheckViolation"}
    assert conn.execute("SELECT title FROM memory_units ORDER BY number").fetchall() == [
        ("Relay vendor 0",), ("Relay vendor 3",)]
    assert conn.execute("SELECT count(*) FROM memory_inbox WHERE unit_id IS NULL").fetchone()[0] == 0
    assert conn.execute("SELECT reason, count FROM memory_rejections").fetchall() == [
        (V.REASON_REFUSED_BY_DATABASE, 2)]
    assert "zqcapture" not in stored_text() and "zqfold" not in stored_text()
    unfolded = capture.remember_many(conn, [rows[1], rows[3]], fold_now=False)  # a capture to fold later too
    assert (unfolded["captured"], unfolded["refused"]) == (0, {rows[1].idempotency_key: "CheckViolation"})


def test_a_batch_holding_one_key_twice_writes_the_first_whatever_the_second_holds(conn):
    """Regression (a review): a task's key leaves out the visibility, so a batch may hold one key twice with other
    values; should the database refuse the second, the key was both written and refused, left out of the fold and
    never folded (its row awaiting no fold). The first of a key is the batch's, as the capture's ON CONFLICT says."""
    first = gates.validate(**FACT, task_id="T-1")
    again = dataclasses.replace(first, visibility="everyone")  # the same key; the inbox's CHECK refuses it
    assert again.idempotency_key == first.idempotency_key
    counts = capture.remember_many(conn, [first, again])
    assert (counts["captured"], counts["inserted"], counts["refused"]) == (1, 1, {})
    assert conn.execute("SELECT count(*) FROM memory_inbox WHERE unit_id IS NULL").fetchone()[0] == 0


def test_a_days_fold_the_database_refuses_folds_its_other_rows_and_drops_the_refused_one(conn, today, stored_text):
    """A refused row left to a later fold (`import --no-fold`) fails the day's fold as a whole: the
    ledger's day fold then folds the day's rows one by one, drops the refused one, counts it as a rejection and
    keeps none of its text; the day's next fold has nothing left to do."""
    rows = [gates.validate(**{**FACT, "title": f"Relay vendor {i}"}, task_id=f"T-{i}") for i in range(4)]
    rows[2] = dataclasses.replace(rows[2], title="zqrefused " + "x" * 80)  # past validation; a CHECK refuses it
    capture.remember_many(conn, rows, fold_now=False)
    with pytest.raises(psycopg.errors.CheckViolation):
        capture.fold(conn, day=today)
    counts = capture.fold_dropping_refused(conn, day=today)
    assert (counts["inserted"], counts["refused"]) == (3, {rows[2].idempotency_key: "CheckViolation"})
    assert capture.fold_dropping_refused(conn, day=today) == {"inserted": 0, "linked": 0, "forgotten": 0, "projects": 0,
                                             "refused": {}}
    assert conn.execute("SELECT count(*) FROM memory_units").fetchone()[0] == 3
    assert conn.execute("SELECT reason, count FROM memory_rejections").fetchall() == [
        (V.REASON_REFUSED_BY_DATABASE, 1)]
    assert "zqrefused" not in stored_text()


def test_a_batch_gated_beforehand_is_judged_and_written_as_a_list_is(conn):
    """remember_many takes gate_soon's batch in place of the candidates: the same verdicts (worker processes
    included), the rejected secret counted and never stored, the rest inserted."""
    rows = [gates.validate(project="acme", kind="env", type="semantic", title=f"Port {i}", body=f"Relay {i} is up.")
            for i in range(V.GATE_PROCESS_MIN_BATCH)]
    rows[7] = gates.validate(project="acme", kind="env", type="semantic", title="Key",
                             body="Deploy with AKIA" + "Q3ZX7KD4LMNPW2RT.")
    gating = capture.gate_soon(conn, rows, workers=2)
    assert len(gating.chunks) > 1 and gating.verdicts() == capture.gate_soon(conn, rows).verdicts()
    counts = capture.remember_many(conn, gating)
    assert counts["inserted"] == len(rows) - 1 and counts["rejected"] == {V.REASON_SECRET: 1}, counts
    assert conn.execute("SELECT count(*) FROM memory_units WHERE body LIKE '%%AKIA%%'").fetchone()[0] == 0


def test_a_gating_is_the_gates_verdict_on_its_own_candidates_and_is_written_once(mem, conn):
    """A Gating cannot carry a candidate past the gates: changing the list after gate_soon changes nothing, and a
    Gating built by hand (any verdicts) or written a second time is refused, through the API too."""
    secret = gates.validate(project="acme", kind="env", type="semantic", title="Key",
                            body="Deploy with AKIA" + "Q3ZX7KD4LMNPW2RT.")
    rows = [gates.validate(**FACT), gates.validate(**FACT, task_id="T-2")]
    gating = capture.gate_soon(conn, rows)
    rows[1] = secret  # a buffer reused for the next batch
    assert capture.remember_many(conn, gating)["captured"] == 2
    with pytest.raises(TypeError, match="gate_soon"):
        capture.remember_many(conn, gating)
    passed: Future[list[str | None]] = Future()
    passed.set_result([None])
    for forged in (capture.Gating((secret,), (passed,)), dataclasses.replace(mem.gate_soon([rows[0]]),
                                                                              candidates=(secret,))):
        with pytest.raises(TypeError, match="gate_soon"):
            mem.remember_many(forged)
    assert conn.execute("SELECT count(*) FROM memory_inbox WHERE body LIKE '%%AKIA%%'").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM memory_units WHERE body LIKE '%%AKIA%%'").fetchone()[0] == 0


def test_a_batch_whose_gates_ran_as_the_kill_switch_went_on_stores_and_counts_nothing(mem, conn, monkeypatch):
    """The switch is read in the batch's own transaction, as remember()'s one statement reads it, not before the
    gates: a batch gated while it went on (the import gates the next batch beside the one before) writes nothing."""
    rows = [gates.validate(**FACT), gates.validate(**{**FACT, "body": "password=" + "Tr0ub4dor-and-3"})]
    real_verdicts = capture.Gating.verdicts

    def switched_on_meanwhile(gating: capture.Gating) -> list[str | None]:
        mem.set_switch("kill", "", "on")  # another session, while the gates run
        return real_verdicts(gating)

    monkeypatch.setattr(capture.Gating, "verdicts", switched_on_meanwhile)
    assert mem.remember_many(rows) == {"captured": 0, "inserted": 0, "rejected": {}, "to_fold": [], "refused": {},
                                       "off": True}
    for table in ("memory_inbox", "memory_units", "memory_rejections"):
        assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table


ORIGIN = (f"SELECT number, origin_session_id, origin_persona, origin_visibility, {READS_ITS_SOURCES} "
          "FROM memory_units WHERE project = 'acme' ORDER BY number")


def test_both_folds_give_a_unit_its_origin_source_and_mark_it_once_it_has_another(mem, conn):
    """A unit is born carrying the inbox row it was folded from (sql/024), by remember() and by the bulk fold
    alike; a source from another task, in the same batch or later, marks it for good (sql/025's side table, the
    unit's row untouched), and a replay of the same task does not."""
    def fact(i, task, **kw):
        return gates.validate(project="acme", kind="note", type="episodic", title=f"Turn {i}",
                              body=f"Turn {i} of the standup was about the relay.", task_id=task, **kw)

    def turn_1(task, **kw):
        return mem.remember(project="acme", kind="note", type="episodic", title="Turn 1",
                            body="Turn 1 of the standup was about the relay.", task_id=task, **kw)

    turn_1("T-1", session_id="S-1", persona="ana")
    capture.remember_many(conn, [fact(2, "T-2", session_id="S-2", persona="mel", visibility=V.VISIBILITY_PRIVATE),
                                 fact(3, "T-3", session_id="S-3"), fact(3, "T-4", session_id="S-4")])
    capture.remember_many(conn, [fact(2, "T-2", session_id="S-2", persona="mel", visibility=V.VISIBILITY_PRIVATE)])
    born = conn.execute(ORIGIN).fetchall()
    assert born == [(1, "S-1", "ana", "project", False), (2, "S-2", "mel", "private", False),
                    (3, "S-3", None, "project", True)], born  # a replay adds no source; two tasks, two sources
    stamped = "SELECT updated_at, revision FROM memory_units WHERE number = 1 AND project = 'acme'"
    before = conn.execute(stamped).fetchone()
    turn_1("T-5", session_id="S-5")
    assert [row[-1] for row in conn.execute(ORIGIN)] == [True, False, True]
    assert conn.execute(stamped).fetchone() == before  # the mark is no update of the unit


def relay_fact(i: int, task: str, **kw: Any) -> gates.Candidate:
    """A distinct episodic fact of project acme, one per number."""
    return gates.validate(project="acme", kind="note", type="episodic", title=f"Fact {i}",
                          body=f"Fact {i}: the relay number {i} restarts nightly.", task_id=task, **kw)


def unit_of(conn: psycopg.Connection[Any], i: int) -> Any:
    return conn.execute("SELECT id FROM memory_units WHERE title = %s", (f"Fact {i}",)).fetchone()[0]


def test_a_duplicate_from_another_task_waits_on_no_lock_of_its_unit(clean, conn):
    """Marking a unit's sources beyond its origin takes no lock of the unit's row (sql/025): a first duplicate, and
    the project's other writes behind its counter row, never wait on an open update of that unit (decay,
    curation, a vote), as they did when sql/024 updated the row."""
    capture.remember(conn, relay_fact(1, "T-1", session_id="S-1"))
    unit = unit_of(conn, 1)
    with psycopg.connect(clean, **database.connection_kwargs()) as holder, \
            psycopg.connect(clean, **database.connection_kwargs()) as writer, \
            holder.transaction():  # decay's or curation's update of the unit, left open
        holder.execute("UPDATE memory_units SET importance = importance WHERE id = %s", (unit,))
        writer.execute("SET lock_timeout = '2s'")
        capture.remember(writer, relay_fact(1, "T-2", session_id="S-2"))
        capture.remember(writer, relay_fact(2, "T-3"))
    assert conn.execute("SELECT count(*) FROM memory_units_beyond_origin WHERE unit_id = %s",
                        (unit,)).fetchone()[0] == 1


@pytest.mark.parametrize("first", [1, 2])
def test_a_bulk_fold_of_duplicates_never_deadlocks_with_a_two_statement_update_of_their_units(clean, conn, first):
    """decay.score_day updates units in two statements of one transaction; a bulk fold adding sources to both units
    in between ran into it in one order or the other (DeadlockDetected) while the mark updated the units."""
    for i in (1, 2):
        capture.remember(conn, relay_fact(i, f"T-{i}", session_id=f"S-{i}"))
    one, other = unit_of(conn, first), unit_of(conn, 3 - first)
    failures: list[BaseException] = []

    def fold() -> None:
        try:
            with psycopg.connect(clean, **database.connection_kwargs()) as writer:
                writer.execute("SET deadlock_timeout = '100ms'")
                capture.remember_many(writer, [relay_fact(1, "T-11"), relay_fact(2, "T-12")])
        except psycopg.Error as error:
            failures.append(error)

    with psycopg.connect(clean, **database.connection_kwargs()) as decay, decay.transaction():
        decay.execute("SET LOCAL deadlock_timeout = '100ms'")
        decay.execute("UPDATE memory_units SET expired_at = now() WHERE id = %s", (one,))
        folding = threading.Thread(target=fold)
        folding.start()
        folding.join(timeout=1.0)  # with no lock of the units taken, the fold does not wait at all
        decay.execute("UPDATE memory_units SET importance = importance WHERE id = %s", (other,))
    folding.join()
    assert not failures, failures
    assert conn.execute("SELECT count(*) FROM memory_sources").fetchone()[0] == 4


ADD_SOURCE = ("INSERT INTO memory_sources (unit_id, project, feed, task_id, persona, visibility) "
              "VALUES (%s, 'acme', 'api', %s, %s, %s)")


def test_a_private_units_audience_holds_when_two_sources_join_it_at_once(clean, conn):
    """Sharing a private unit (a project source) while another persona's private source joins it: the second
    trigger waits on the row and then tests private_to on the row as committed, not as it read it first."""
    capture.remember(conn, relay_fact(1, "T-1", persona="ana", visibility=V.VISIBILITY_PRIVATE))
    unit = unit_of(conn, 1)
    failures: list[BaseException] = []
    with psycopg.connect(clean, **database.connection_kwargs()) as sharing, \
            psycopg.connect(clean, **database.connection_kwargs()) as joining:
        def join() -> None:
            try:
                joining.execute(ADD_SOURCE, (unit, "T-3", "mel", V.VISIBILITY_PRIVATE))
            except psycopg.Error as error:
                failures.append(error)

        second = threading.Thread(target=join)
        with sharing.transaction():  # left open: private_to NULL, the row locked
            sharing.execute(ADD_SOURCE, (unit, "T-2", "bob", V.VISIBILITY_PROJECT))
            second.start()
            second.join(timeout=0.5)
        second.join()
    assert not failures, failures
    assert conn.execute("SELECT private_to, memory_unit_audience(id) FROM memory_units WHERE id = %s",
                        (unit,)).fetchone() == (None, None)


def test_every_source_added_marks_its_unit_and_no_reader_sees_a_mark_of_a_unit_it_may_not(clean, conn):
    """A source added to a unit (by the owner: no scoped writer adds one, sql/038) marks the unit, and another
    persona's private source widens a private unit's audience; the marks show a reader only the units it may see."""
    capture.remember(conn, relay_fact(1, "T-1", session_id="S-1"))
    capture.remember(conn, relay_fact(2, "T-2", persona="ana", visibility=V.VISIBILITY_PRIVATE, session_id="S-2"))
    public, private = unit_of(conn, 1), unit_of(conn, 2)
    for name, unit, persona, visibility in (("w", public, None, V.VISIBILITY_PROJECT),
                                            ("mel", private, "mel", V.VISIBILITY_PRIVATE)):
        conn.execute(ADD_SOURCE, (unit, f"T-{name}", persona, visibility))
        conn.commit()
    marked = {row[0] for row in conn.execute("SELECT unit_id FROM memory_units_beyond_origin")}
    assert marked == {public, private}
    assert conn.execute("SELECT private_to FROM memory_units WHERE id = %s", (private,)).fetchone()[0] == [
        "ana", "mel"]
    for persona, seen in ((None, {public}), ("ana", {public, private}), ("kim", {public})):
        with psycopg.connect(clean, **database.connection_kwargs()) as reader, \
                authz.scoped(reader, authz.Actor.reader("acme", persona)):
            assert {row[0] for row in reader.execute("SELECT unit_id FROM memory_units_beyond_origin")} == seen


def test_deleting_a_source_waits_on_no_lock_of_its_unit(clean, conn):
    """A source's delete marks its unit (sql/025) without locking it: the side table has no foreign key, whose
    key-share check waited on a merge's FOR UPDATE of the unit (curation/lock_pair)."""
    capture.remember(conn, relay_fact(1, "T-1", session_id="S-1"))
    unit = unit_of(conn, 1)
    with psycopg.connect(clean, **database.connection_kwargs()) as merging, \
            psycopg.connect(clean, **database.connection_kwargs()) as deleting, merging.transaction():
        merging.execute("SELECT id FROM memory_units WHERE id = %s FOR UPDATE", (unit,))
        deleting.execute("SET lock_timeout = '2s'")
        deleting.execute("DELETE FROM memory_sources WHERE unit_id = %s", (unit,))
    assert conn.execute("SELECT count(*) FROM memory_units_beyond_origin WHERE unit_id = %s",
                        (unit,)).fetchone()[0] == 1


def test_a_source_moved_to_another_unit_marks_both(clean, conn):
    """An update of a source fires the mark once for the sources before it and once for those after: a source
    moved from one unit to another leaves both reading their sources."""
    for i in (1, 2):
        capture.remember(conn, relay_fact(i, f"T-{i}", session_id=f"S-{i}"))
    left, joined = unit_of(conn, 1), unit_of(conn, 2)
    conn.execute("UPDATE memory_sources SET unit_id = %s WHERE unit_id = %s", (joined, left))
    assert {row[0] for row in conn.execute("SELECT unit_id FROM memory_units_beyond_origin")} == {left, joined}


ADD_SOURCES_FROM_INBOX = ("INSERT INTO memory_sources (unit_id, project, feed, task_id, visibility, inbox_id) "
                          "SELECT %s, 'acme', 'api', t.task, 'project', t.inbox "
                          "FROM unnest(%s::text[], %s::bigint[]) AS t(task, inbox)")


@pytest.mark.parametrize(("inboxes", "marked"), [
    (["origin"], False),  # the unit's own row again, from another task: nothing beyond the origin
    (["origin", "origin"], False),
    (["origin", "other"], True),  # one statement, one of its rows the origin's: the other is beyond it
    (["other", "origin"], True),
    (["origin", None], True),  # a source with no inbox row
])
def test_the_audience_trigger_marks_exactly_the_units_with_sources_beyond_their_origin(clean, conn, inboxes, marked):
    """sql/032's first read, which lets the audience trigger return early, skips exactly the statements sql/025's
    per-unit rule leaves alone: several sources of one unit added in one statement are beyond its origin as soon as
    one of them is another inbox row than the unit's origin, or none."""
    capture.remember(conn, relay_fact(1, "T-1"))
    capture.remember(conn, relay_fact(2, "T-2"))
    unit = unit_of(conn, 1)
    rows = {"origin": conn.execute("SELECT origin_inbox_id FROM memory_units WHERE id = %s", (unit,)).fetchone()[0],
            "other": conn.execute("SELECT origin_inbox_id FROM memory_units WHERE id = %s",
                                  (unit_of(conn, 2),)).fetchone()[0], None: None}
    conn.execute(ADD_SOURCES_FROM_INBOX, (unit, [f"T-x{i}" for i in range(len(inboxes))], [rows[i] for i in inboxes]))
    assert conn.execute("SELECT count(*) FROM memory_units_beyond_origin WHERE unit_id = %s",
                        (unit,)).fetchone()[0] == int(marked)
    assert conn.execute("SELECT count(*) FROM memory_units_beyond_origin").fetchone()[0] == int(marked)


def test_a_days_fold_the_store_refuses_drops_nothing(conn, today, monkeypatch):
    """Only a row's own values refused (a CHECK, a NOT NULL, bad data) drop it: an integrity error that says the
    store is wrong (a unit number already taken) is raised, and every row of the day waits for the next fold."""
    rows = [gates.validate(**{**FACT, "title": f"Relay vendor {i}"}, task_id=f"T-{i}") for i in range(3)]
    capture.remember_many(conn, rows, fold_now=False)

    def number_taken(conn, **kwargs):
        raise psycopg.errors.UniqueViolation('duplicate key value violates "memory_units_project_number_key"')

    with monkeypatch.context() as patched:
        patched.setattr(capture, "fold", number_taken)
        with pytest.raises(psycopg.errors.UniqueViolation):
            capture.fold_dropping_refused(conn, day=today)
    assert conn.execute("SELECT count(*) FROM memory_inbox WHERE unit_id IS NULL").fetchone()[0] == 3
    assert conn.execute("SELECT count(*) FROM memory_rejections").fetchone()[0] == 0
    assert capture.fold_dropping_refused(conn, day=today)["inserted"] == 3


def test_a_row_waiting_in_words_corrected_away_is_buried_when_its_unit_is_forgotten(mem, conn, stored_text):
    """A row waiting for its fold in words its unit was corrected away from is buried when that unit is forgotten:
    the words were the unit's, in an earlier wording, so the row's text is blanked."""
    held = mem.remember(**EARLIER, task_id="T-1")
    captured = capture.remember_many(conn, [gates.validate(**EARLIER, task_id="T-2")], fold_now=False)
    mem.correct("acme", held.token, body=FACT["body"])
    mem.forget("acme", held.token, authz.Actor.for_project("acme", "op", forget=True))
    assert capture.fold(conn, keys=captured["to_fold"])["inserted"] == 0
    assert conn.execute("SELECT outcome FROM memory_inbox WHERE task_id = 'T-2'").fetchone()[0] == "forgotten"
    assert EARLIER["body"] not in stored_text()


# --- A fold judges a row by what the ledger held when it was captured (sql/040) -------------

def replace_words(mem, token: str, change: str, **private) -> None:
    """Replace a unit's words (EARLIER's) by FACT's: in place, or by a unit superseding it."""
    if change == "correction":
        mem.correct("acme", token, body=FACT["body"])
    else:
        mem.remember(**FACT, task_id="T-3", supersedes=token, **private)


@pytest.mark.parametrize("change", ["correction", "supersession"])
def test_a_row_captured_while_a_unit_held_its_words_and_folded_after_they_were_replaced_is_that_units_duplicate(
        mem, conn, change):
    """Regression: a row captured to fold later (import --no-fold, the daily fold) in the words a live unit held, and
    folded after a correction or a supersession replaced them, became a new live unit in the replaced words: the
    correction undone, or two live units contradicting each other. It is the duplicate and a source of that unit, as
    a fold at its capture would have made it."""
    held = mem.remember(**EARLIER, task_id="T-1")
    captured = capture.remember_many(conn, [gates.validate(**EARLIER, task_id="T-2")], fold_now=False)
    replace_words(mem, held.token, change)
    assert capture.fold(conn, keys=captured["to_fold"]) == {"inserted": 0, "linked": 1, "forgotten": 0,
                                                            "projects": 1}
    assert conn.execute("SELECT unit_id::text, outcome FROM memory_inbox WHERE task_id = 'T-2'").fetchall() == [
        (held.unit_id, "duplicate")]
    assert conn.execute("SELECT count(*) FROM memory_sources WHERE unit_id = %s", (held.unit_id,)).fetchone()[0] == 2
    bodies = [r[0] for r in conn.execute("SELECT body FROM memory_units WHERE status IN ('active', 'proposed')")]
    assert bodies == [FACT["body"]]  # the replaced words hold no live unit


@pytest.mark.parametrize("change", ["correction", "supersession"])
def test_a_late_row_of_another_persona_never_opens_a_private_unit_whose_words_it_held(mem, conn, change):
    """An attacker's pass: linked to Alice's private unit, Bob's project-visible row (or his private one) made her
    unit shared (or his too) through the audience of its sources, and with it her corrected words, or her superseded
    unit, which Bob never wrote. Bob's rows become a unit of their own, as before; Alice's unit keeps its audience."""
    alice = dict(persona="alice", visibility=V.VISIBILITY_PRIVATE)
    held = mem.remember(**EARLIER, task_id="T-1", **alice)
    rows = [gates.validate(**EARLIER, task_id="T-2", persona="bob"),
            gates.validate(**EARLIER, task_id="T-4", persona="bob", visibility=V.VISIBILITY_PRIVATE)]
    captured = capture.remember_many(conn, rows, fold_now=False)
    replace_words(mem, held.token, change, **alice)
    assert capture.fold(conn, keys=captured["to_fold"])["inserted"] == 1  # Bob's words, his own unit
    assert conn.execute("SELECT count(*) FROM memory_inbox WHERE task_id IN ('T-2', 'T-4') AND unit_id = %s",
                        (held.unit_id,)).fetchone()[0] == 0
    assert conn.execute("SELECT private_to FROM memory_units WHERE id = %s", (held.unit_id,)).fetchone()[0] == [
        "alice"]
    assert mem.unit("acme", held.token, authz.Actor.reader("acme", "bob")) is None


@pytest.mark.parametrize("change", ["correction", "supersession"])
def test_a_late_private_row_joins_the_private_unit_of_its_own_persona_that_held_its_words(mem, conn, change):
    """Linking a row of the unit's own persona widens its audience to no one: it is that unit's duplicate."""
    alice = dict(persona="alice", visibility=V.VISIBILITY_PRIVATE)
    held = mem.remember(**EARLIER, task_id="T-1", **alice)
    captured = capture.remember_many(conn, [gates.validate(**EARLIER, task_id="T-5", **alice)], fold_now=False)
    replace_words(mem, held.token, change, **alice)
    assert capture.fold(conn, keys=captured["to_fold"])["inserted"] == 0
    assert conn.execute("SELECT unit_id::text FROM memory_inbox WHERE task_id = 'T-5'").fetchone()[0] == held.unit_id
    assert conn.execute("SELECT private_to FROM memory_units WHERE id = %s", (held.unit_id,)).fetchone()[0] == [
        "alice"]


def test_a_row_captured_before_the_unit_that_later_held_its_words_existed_is_a_unit_of_its_own(mem, conn):
    """The capture's time bounds the link from below too: a row captured before a unit held its words is no
    duplicate of that unit, however the unit ended."""
    captured = capture.remember_many(conn, [gates.validate(**EARLIER, task_id="T-2")], fold_now=False)
    held = mem.remember(**EARLIER, task_id="T-1")
    mem.remember(**FACT, task_id="T-3", supersedes=held.token)
    assert capture.fold(conn, keys=captured["to_fold"])["inserted"] == 1


def test_a_row_captured_while_a_unit_held_its_words_again_is_linked_after_their_last_replacement(mem, conn):
    """A unit corrected back to words it held before holds them again from that correction: a row captured then is
    its duplicate once they are replaced a second time (the replacement's time is the latest)."""
    held = mem.remember(**EARLIER, task_id="T-1")
    mem.correct("acme", held.token, body=FACT["body"])
    mem.correct("acme", held.token, body=EARLIER["body"])
    captured = capture.remember_many(conn, [gates.validate(**EARLIER, task_id="T-2")], fold_now=False)
    mem.correct("acme", held.token, body=FACT["body"])
    assert capture.fold(conn, keys=captured["to_fold"])["inserted"] == 0


def test_a_row_captured_after_a_unit_was_superseded_is_a_new_assertion(mem, conn):
    """The rule is the capture's time: the same words written after the supersession are a new unit, as remember()
    makes them, also where the superseded unit was valid from a later date (its valid_until is that date)."""
    held = mem.remember(**EARLIER, task_id="T-1")
    later = mem.remember(**{**EARLIER, "body": "The relay will be bought from Ostwind GmbH."}, task_id="T-6",
                         valid_from=datetime.now(UTC) + timedelta(days=365))
    mem.remember(**FACT, task_id="T-3", supersedes=held.token)
    mem.remember(**{**FACT, "body": "The relay will be bought from Nordlicht."}, task_id="T-7",
                 supersedes=later.token)
    captured = capture.remember_many(conn, [gates.validate(**EARLIER, task_id="T-2"),
                                            gates.validate(**{**EARLIER, "body": "The relay will be bought from "
                                                                                 "Ostwind GmbH."}, task_id="T-8")],
                                     fold_now=False)
    assert capture.fold(conn, keys=captured["to_fold"])["inserted"] == 2


def test_a_superseded_unit_corrected_later_held_its_old_words_only_until_its_supersession(mem, conn):
    """An attacker's pass: correcting a superseded unit stretched its old words' tenure to the correction, so the
    same words written after the supersession were linked to the dead unit instead of becoming a live one."""
    held = mem.remember(**EARLIER, task_id="T-1")
    mem.remember(**FACT, task_id="T-3", supersedes=held.token)
    captured = capture.remember_many(conn, [gates.validate(**EARLIER, task_id="T-2")], fold_now=False)
    mem.correct("acme", held.token, body="The relay was bought from Ostwind AG.")
    assert capture.fold(conn, keys=captured["to_fold"])["inserted"] == 1


def test_a_row_captured_before_a_unit_first_held_its_words_is_a_unit_of_its_own_however_often_they_changed(mem, conn):
    """A review: a wording's tenure began at the unit's latest replacement before it, which a later correction back
    and forth moved, so a row captured before the unit ever held the words was linked. Each correction now keeps
    when its unit began to hold the wording it replaces."""
    middle = {**FACT, "body": "The relay comes from Ostwind, via Hamburg."}
    held = mem.remember(**EARLIER, task_id="T-1")
    captured = capture.remember_many(conn, [gates.validate(**middle, task_id="T-2")], fold_now=False)
    for body in (middle["body"], EARLIER["body"], FACT["body"]):  # the unit holds the row's words after its capture
        mem.correct("acme", held.token, body=body)
    assert capture.fold(conn, keys=captured["to_fold"])["inserted"] == 1


def test_the_capture_copies_each_column_as_the_inbox_types_it_and_every_value_back_unchanged(mem, conn):
    """The capture's COPY is told each column's type (V.INBOX_COLUMN_TYPES) instead of inspecting every value: they
    are the inbox's own, and values an array or a COPY line could misread come back as they were sent."""
    declared = [conn.adapters.types.get_oid(name) for name in V.INBOX_COLUMN_TYPES]
    actual = [conn.execute("SELECT atttypid FROM pg_attribute WHERE attrelid = 'memory_inbox'::regclass"
                           " AND attname = %s", (column,)).fetchone()[0] for column in V.INBOX_COLUMNS]
    assert declared == actual
    awkward = ["a,b", '{"x"}', "back\\slash", "NULL", "ünïcode ✓", "\\N"]
    body = "Line one\twith a tab,\nline two with \\N and \\. in it."
    candidate = gates.validate(**{**FACT, "body": body}, paths=awkward, keywords=list(reversed(awkward)), confidence=1,
                               importance=0.25, valid_from=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
                               task_id="T-1")
    assert capture.remember_many(conn, [candidate])["inserted"] == 1
    stored = conn.execute("SELECT body, paths, keywords, confidence, importance, valid_from, task_id, persona "
                          "FROM memory_inbox").fetchone()
    assert stored == (body, awkward, list(reversed(awkward)), 1.0, 0.25, candidate.valid_from, "T-1", None)


COUNTER_ROW = "SELECT ctid, xmin FROM memory_projects WHERE project = 'acme'"


def test_writes_lock_their_projects_counter_row_without_a_new_version_so_an_old_snapshot_slows_none(mem, conn, clean):
    """Every write set the counter row's last_number: a version per write, none prunable while an older snapshot
    lived (a pg_dump, a long query), and every write and recall walked them all (remember() 2x slower after 6,400
    writes). The writes lock the row, numbering after the project's highest unit, and leave it as it was."""
    mem.remember(**FACT)
    before = conn.execute(COUNTER_ROW).fetchone()
    with psycopg.connect(clean) as old_snapshot:
        old_snapshot.execute("SELECT txid_current()")  # open, as a backup's transaction is
        for i in range(20):
            mem.remember(**{**FACT, "title": f"Relay fact {i}", "body": f"The relay listens on port {9000 + i}."})
        capture.remember_many(conn, [gates.validate(**{**FACT, "title": f"Batch fact {i}",
                                                       "body": f"The batch relay uses lane {i}."}) for i in range(5)])
        assert conn.execute(COUNTER_ROW).fetchone() == before
    numbers = [n for (n,) in conn.execute("SELECT number FROM memory_units WHERE project = 'acme' ORDER BY number")]
    assert numbers == list(range(1, 27))


def test_a_number_a_deleted_or_truncated_unit_held_is_never_given_to_another(mem, conn):
    """A token is cited as mem-<n> for good: the numbers of units deleted by hand, or of all of them truncated, stay
    taken (memory_projects.last_number, raised by memory_units_keep_numbers), by remember() and the fold alike."""
    for i in range(3):
        mem.remember(**{**FACT, "title": f"Fact {i}", "body": f"The relay uses channel {i}."})
    top = "SELECT id FROM memory_units WHERE project = 'acme' AND number = 3"
    with conn.transaction():
        unit = conn.execute(top).fetchone()[0]
        conn.execute("DELETE FROM memory_sources WHERE unit_id = %s", (unit,))
        conn.execute("DELETE FROM memory_inbox WHERE unit_id = %s", (unit,))
        conn.execute("DELETE FROM memory_units WHERE id = %s", (unit,))
    assert mem.remember(**{**FACT, "title": "After the delete", "body": "The relay moved."}).token == "mem-4"
    conn.execute("TRUNCATE memory_units CASCADE")
    assert mem.remember(**{**FACT, "title": "After the truncate", "body": "The relay is new."}).token == "mem-5"
    batch = capture.remember_many(conn, [gates.validate(**{**FACT, "title": "Folded", "body": "The relay folds."})])
    assert batch["inserted"] == 1 and conn.execute(
        "SELECT max(number), memory_last_number('acme') FROM memory_units WHERE project = 'acme'").fetchone() == (6, 6)


def test_a_number_stays_taken_on_a_replica_and_when_its_unit_moves_and_only_the_app_reads_the_highest(mem, conn):
    """Regression (an attacker's pass over sql/047): under session_replication_role = replica the triggers that keep
    a deleted unit's number did not fire, and a unit moved to another project left its number free in its old one:
    both gave a token twice. And memory_last_number, which runs as the owner, is memory_app's to call alone."""
    for i in range(3):
        mem.remember(**{**FACT, "title": f"Fact {i}", "body": f"The relay uses channel {i}."})
    mem.remember(**{**FACT, "project": "elsewhere"})
    with conn.transaction():
        conn.execute("SET LOCAL session_replication_role = replica")  # foreign keys off too: no dependents to clear
        conn.execute("DELETE FROM memory_units WHERE project = 'acme' AND number = 3")
    assert mem.remember(**{**FACT, "title": "After the delete", "body": "The relay moved."}).token == "mem-4"
    conn.execute("UPDATE memory_units SET project = 'elsewhere', number = 2 WHERE project = 'acme' AND number = 4")
    assert mem.remember(**{**FACT, "title": "After the move", "body": "The relay moved again."}).token == "mem-5"
    callers = {role: conn.execute("SELECT has_function_privilege(%s, 'memory_last_number(text)', 'EXECUTE')",
                                  (role,)).fetchone()[0] for role in (V.APP_ROLE, V.READER_ROLE, "public")}
    assert callers == {V.APP_ROLE: True, V.READER_ROLE: False, "public": False}
