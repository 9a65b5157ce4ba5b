"""Isolation: every read path runs as the restricted role with the caller's scopes and persona, so no caller sees
another project's units or another persona's private units, sources or tokens; row-level security is forced on
every memory table without breaking a non-superuser owner's maintenance path; forget needs a listed operator; the
query is encoded before any transaction opens.

The randomized test draws its readers, projects, tokens and queries from ISOLATION_SEED (random when unset; the
seed is in every failure message) and runs ISOLATION_TRIALS trials (40 in `make test`; more in a soak).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import string
import sys
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

import memory_assets
from memory_assets import authz, database, recall
from memory_assets import vocabulary as V
from memory_assets.api import Memory
from memory_assets.authz import Actor
from memory_assets.cli import main
from memory_assets.errors import ScopeError, ValidationError
from tests.cases import MIGRATION_RECORDS, T2, embed_all

PROJECTS = ("alpha", "beta", "gamma")
PERSONAS = ("ana", "bo", "api")  # "api" was the default reader's name: it must be an ordinary persona
READERS = (None, "ana", "bo", "api", "mallory")
QUERY = "deploy pipeline release train"
TOKEN = re.compile(r"\bmem-\d+\b")


@dataclass
class Secret:
    """Something only some readers may see: a unit (its text carries the marker) or a private source (its task id
    carries the marker) of one project, for every reader (audience None) or one persona."""

    project: str
    marker: str
    audience: str | None
    token: str | None = None  # a unit's token; None for a source
    unit_id: str | None = None
    review: bool = False


def visible(secret: Secret, actor: Actor, project: str | None) -> bool:
    """The oracle: the requested project (or any, for summaries), in the actor's read scope, and its persona's."""
    return ((project is None or secret.project == project) and secret.project in actor.read
            and (secret.audience is None or secret.audience == actor.name))


def marker(rng: random.Random) -> str:
    """A word that occurs nowhere else: found in an output, it names exactly one secret."""
    return "zq" + "".join(rng.choice(string.ascii_lowercase) for _ in range(10))


def fact(project: str, mark: str, **extra: Any) -> dict[str, Any]:
    """A candidate that passes every gate and carries its marker in title and body."""
    return dict(project=project, kind="env", type="semantic", title=f"Deploy note {mark}",
                body=f"The deploy pipeline of {project} uses {mark} because the release train needs it.", **extra)


def seed(mem: Memory, conn: psycopg.Connection[Any], rng: random.Random) -> list[Secret]:
    """Per project: shared units, each persona's private units (active, in review, a superseded chain), a shared
    unit with a private source, a shared review unit that conflicts with a private one, a supersession chain, and
    some rejections; then vectors and bundles, so every read path has something to leak."""
    secrets: list[Secret] = []

    def remember(project: str, audience: str | None, review: bool = False, **extra: Any) -> Secret:
        mark = marker(rng)
        private = {"persona": audience, "visibility": V.VISIBILITY_PRIVATE} if audience else {}
        result = mem.remember(**fact(project, mark, confidence=0.5 if review else 0.9, **private, **extra))
        assert result.token, result
        secret = Secret(project, mark, audience, result.token, result.unit_id, review)
        secrets.append(secret)
        return secret

    for number, project in enumerate(PROJECTS):
        for _ in range(3):
            remember(project, None)
        older = remember(project, None)
        remember(project, None, supersedes=older.token)
        for persona in PERSONAS:
            remember(project, persona)
            remember(project, persona, review=True)
            first = remember(project, persona)
            remember(project, persona, supersedes=first.token)
        shared_review = remember(project, None, review=True)
        conflict = next(s for s in secrets if s.project == project and s.audience == "ana")
        conn.execute("UPDATE memory_units SET conflicts_with = %s WHERE id = %s",
                     (conflict.unit_id, shared_review.unit_id))  # what curation records for a contradiction
        # one shared unit with a private source: the source (its task id) is bo's alone
        both = remember(project, None)
        source_mark = marker(rng)
        same = fact(project, both.marker)
        assert mem.remember(**same, persona="bo", visibility=V.VISIBILITY_PRIVATE,
                            task_id=f"T-{source_mark}").status == V.OUTCOME_DUPLICATE
        secrets.append(Secret(project, source_mark, "bo"))
        for _ in range(number + 1):  # rejections differ per project, so a summary shows whose it counted
            leaked = {**fact(project, "x"), "body": "password=" + "Tr0ub4dor-and-3" + " for the release train"}
            assert mem.remember(**leaked).status == V.OUTCOME_REJECTED
    for project in PROJECTS:
        mem.compile_bundle(project)
    return secrets


def assert_no_leak(output: Any, actor: Actor, project: str | None, secrets: list[Secret], what: str) -> str:
    """No marker, unit id or token of a secret the actor may not see in `output`; returns the output as text."""
    text = json.dumps(output, default=str, sort_keys=True)
    for secret in secrets:
        if not visible(secret, actor, project):
            assert secret.marker not in text, f"{what}: {secret} leaked to {actor}"
            assert not secret.unit_id or secret.unit_id not in text, f"{what}: id of {secret} leaked to {actor}"
    if project is not None:
        allowed = {s.token for s in secrets if s.token and visible(s, actor, project)}
        assert set(TOKEN.findall(text)) <= allowed, f"{what}: {set(TOKEN.findall(text)) - allowed} shown to {actor}"
    return text


def random_actor(rng: random.Random) -> Actor:
    """A reader of one or two projects, or a reader-writer of one, naming a persona or none."""
    persona = rng.choice(READERS)
    shape = rng.random()
    if shape < 0.6:
        return Actor.reader(rng.choice(PROJECTS), persona)
    if shape < 0.85:
        return Actor.readers(tuple(rng.sample(PROJECTS, 2)), persona)
    return Actor.for_project(rng.choice(PROJECTS), persona or V.NO_PERSONA)


@pytest.fixture
def seeded(mem, conn, embedder):
    rng = random.Random(0)
    secrets = seed(mem, conn, rng)
    embed_all(conn, embedder)
    return secrets


def test_randomized_cross_project_and_cross_persona_reads_leak_nothing(mem, conn, seeded, monkeypatch):
    """Recall, show, history, stats, the review queue, prompt blocks (recalled and bundled) and bundles, each for a
    random reader and project: only what the oracle allows, and exactly that for stats and the review queue. The
    full-text leg reads the project's units by its key or through the owner's GIN match (sql/027), at random."""
    seed_value = int(os.environ.get("ISOLATION_SEED") or random.randrange(2**32))
    trials = int(os.environ.get("ISOLATION_TRIALS", "40"))
    rng = random.Random(seed_value)
    status = dict(conn.execute("SELECT id::text, status FROM memory_units").fetchall())
    units = [s for s in seeded if s.token]
    for trial in range(trials):
        actor = random_actor(rng)
        project = rng.choice(PROJECTS)
        text_index_min = rng.choice((0, 10**9))
        monkeypatch.setattr(V, "TEXT_INDEX_MIN_PROJECT_UNITS", text_index_min)
        where = f"seed {seed_value} trial {trial} project {project} text index from {text_index_min}"
        query = QUERY if rng.random() < 0.5 else f"{QUERY} {rng.choice(seeded).marker}"  # guessing a marker
        hits = mem.recall(project, query, k=rng.randint(1, 50), actor=actor)
        assert_no_leak([h.as_dict() for h in hits], actor, project, seeded, f"recall {where}")
        assert len(hits) == 0 or project in actor.read

        for secret in rng.sample(units, 4):
            token = secret.token
            assert token is not None
            shown = mem.unit(project, token, actor=actor)
            assert_no_leak(shown, actor, project, seeded, f"show {token} {where}")
            owner = next(s for s in units if s.project == project and s.token == token)
            assert (shown is not None) == visible(owner, actor, project), f"show {token} {where}"
            try:
                chain = mem.history(project, token, actor=actor)
            except ValidationError:
                assert not visible(owner, actor, project), f"history {token} {where}"
            else:
                assert_no_leak(chain, actor, project, seeded, f"history {token} {where}")
                assert token in [link["token"] for link in chain]

        scope = rng.choice((project, None))
        counts = mem.stats(scope, actor=actor)
        expected = Counter(status[s.unit_id] for s in units if s.unit_id and visible(s, actor, scope))
        assert counts["units_by_status"] == dict(sorted(expected.items())), f"stats {scope} {where}"
        rejected = sum(PROJECTS.index(p) + 1 for p in actor.read if scope in (None, p))
        assert sum(counts["rejections_by_reason"].values()) == rejected, f"stats {scope} {where}"

        queue = mem.review_queue(scope, actor=actor)
        assert_no_leak(queue, actor, scope, seeded, f"review {scope} {where}")
        waiting = {(s.project, s.token) for s in units if s.review and visible(s, actor, scope)}
        assert {(r["project"], r["token"]) for r in queue} == waiting, f"review {scope} {where}"

        for block in (mem.prompt_block(project, actor=actor), mem.prompt_block(project, query=query, actor=actor)):
            assert_no_leak(block, actor, project, seeded, f"prompt block {where}")
            assert block == "" or project in actor.read
        stored = mem.bundle(project, actor=actor)
        assert_no_leak(stored, actor, project, seeded, f"bundle {where}")
        assert (stored is not None) == (project in actor.read)
    for project in PROJECTS:  # what the asset compiles: the project's shared units only, for any reader
        assert_no_leak(mem.compile_bundle(project), Actor.reader(project), project, seeded, f"compile {project}")


def test_mcp_recall_across_projects_and_personas_leaks_nothing(mem, seeded):
    """The MCP server's read tools, for random projects and personas (no persona included), over stdio: recall (now
    and as of a time) and cite, which answers tokens only."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    seed_value = int(os.environ.get("ISOLATION_SEED") or random.randrange(2**32))
    rng = random.Random(seed_value)

    async def calls() -> None:
        params = StdioServerParameters(command=sys.executable, args=["-m", "memory_assets.cli", "mcp"],
                                       env={**os.environ, "HF_HUB_OFFLINE": "1"})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for trial in range(12):
                project, persona = rng.choice(PROJECTS), rng.choice(READERS)
                query = QUERY if rng.random() < 0.5 else f"{QUERY} {rng.choice(seeded).marker}"
                arguments = {"project": project, "query": query, "k": 50}
                if persona:
                    arguments["persona"] = persona
                result = await session.call_tool("recall", arguments)
                assert not result.isError, result.content
                found = json.loads(result.content[0].text)
                actor = Actor.reader(project, persona)
                assert_no_leak(found, actor, project, seeded, f"mcp seed {seed_value} trial {trial}")
                assert found["hits"], "the shared units answer every query"
                historical = await session.call_tool("recall", {**arguments, "as_of": datetime.now(UTC).isoformat()})
                assert not historical.isError, historical.content
                assert_no_leak(json.loads(historical.content[0].text), actor, project, seeded,
                               f"mcp as_of seed {seed_value} trial {trial}")
                tokens = " ".join(s.token for s in rng.sample([s for s in seeded if s.token], 6) if s.token)
                cited = await session.call_tool("cite", {"project": project, "task_id": f"T-iso-{trial}",
                                                         "text": f"I used {tokens}."})
                assert not cited.isError, cited.content
                assert_no_leak(json.loads(cited.content[0].text), actor, None, seeded,
                               f"mcp cite seed {seed_value} trial {trial}")

    asyncio.run(calls())


def test_randomized_historical_recall_each_leg_and_filter_leaks_nothing(mem, conn, seeded, monkeypatch):
    """Recall's other SQL paths: as_of (the historical leg, where superseded private units answer), the dense and
    the sparse leg alone, kind and type filters, the full-text leg by the project's key or the owner's GIN match; as
    random readers of random projects."""
    seed_value = int(os.environ.get("ISOLATION_SEED") or random.randrange(2**32))
    rng = random.Random(seed_value)
    # midway through each superseded unit's validity: when it (some of them private) answers as_of questions; a
    # millisecond before its supersession was before it began when a write and its superseding write came that fast
    windows = dict(conn.execute("SELECT id::text, valid_from + (valid_until - valid_from) / 2 FROM memory_units "
                                "WHERE status = 'superseded'").fetchall())
    for trial in range(int(os.environ.get("ISOLATION_TRIALS", "40"))):
        actor, project = random_actor(rng), rng.choice(PROJECTS)
        query = QUERY if rng.random() < 0.5 else f"{QUERY} {rng.choice(seeded).marker}"
        arguments: dict[str, Any] = {"k": rng.randint(1, 50), "legs": rng.choice(("hybrid", "dense", "sparse")),
                                     "as_of": rng.choice((None, datetime.now(UTC), rng.choice(list(windows.values()))))}
        if rng.random() < 0.3:
            arguments["kinds"] = rng.choice((["env"], ["env", "note"], ["gotcha"]))
        if rng.random() < 0.3:
            arguments["types"] = rng.choice((["semantic"], ["episodic"]))
        text_index_min = rng.choice((0, 10**9))
        monkeypatch.setattr(V, "TEXT_INDEX_MIN_PROJECT_UNITS", text_index_min)
        hits = mem.recall(project, query, actor=actor, **arguments)
        where = f"seed {seed_value} trial {trial} {project} {arguments} text index from {text_index_min}"
        assert_no_leak([h.as_dict() for h in hits], actor, project, seeded, f"recall {where}")
        assert len(hits) == 0 or project in actor.read
    for secret in (s for s in seeded if s.unit_id in windows):  # each superseded unit: its audience only, as of then
        for persona in READERS:
            actor = Actor.reader(secret.project, persona)
            hits = mem.recall(secret.project, f"{QUERY} {secret.marker}", k=50, as_of=windows[str(secret.unit_id)],
                              actor=actor)
            assert (secret.token in [h.token for h in hits]) == visible(secret, actor, secret.project), secret
            assert_no_leak([h.as_dict() for h in hits], actor, secret.project, seeded, f"as_of {secret} {persona}")


def test_randomized_cli_reads_leak_nothing(mem, seeded):
    """The CLI's read commands with --persona (show, recall with --as-of, review list) and stats, in process."""
    seed_value = int(os.environ.get("ISOLATION_SEED") or random.randrange(2**32))
    rng = random.Random(seed_value)
    units = [s for s in seeded if s.token]
    runner = CliRunner()
    for trial in range(12):
        project, persona = rng.choice(PROJECTS), rng.choice(READERS)
        actor = Actor.reader(project, persona)
        as_persona = ["--persona", persona] if persona else []
        where = f"cli seed {seed_value} trial {trial} {project} {persona}"
        secret = rng.choice(units)
        shown = runner.invoke(main, ["show", str(secret.token), "--project", project, "--json", *as_persona])
        # a refusal names the token the caller asked for: check it for markers and ids only
        assert_no_leak(shown.output, actor, project if shown.exit_code == 0 else None, seeded, f"show {where}")
        owner = next(s for s in units if s.project == project and s.token == secret.token)
        assert (shown.exit_code == 0) == visible(owner, actor, project), f"show {secret.token} {where}"
        query = QUERY if rng.random() < 0.5 else f"{QUERY} {rng.choice(seeded).marker}"
        at = ["--as-of", datetime.now(UTC).isoformat()] if rng.random() < 0.5 else []
        found = runner.invoke(main, ["recall", "--project", project, "--query", query, "--k", "50", "--json",
                                     *at, *as_persona])
        assert found.exit_code == 0, found.output
        assert_no_leak(json.loads(found.stdout), actor, project, seeded, f"recall {where}")
        queue = runner.invoke(main, ["review", "list", "--project", project, "--json", *as_persona])
        assert queue.exit_code == 0, queue.output
        assert_no_leak(json.loads(queue.stdout), actor, project, seeded, f"review {where}")
        waiting = {s.token for s in units if s.review and visible(s, actor, project)}
        assert {r["token"] for r in json.loads(queue.stdout)} == waiting, f"review {where}"
    everyone = runner.invoke(main, ["review", "list", "--json"])  # every project, naming no persona
    assert_no_leak(json.loads(everyone.stdout), Actor.readers(PROJECTS), None, seeded, "review of every project")


def test_show_history_review_stats_and_prompt_blocks_hide_another_personas_private_unit(mem, conn):
    """Regression: these read paths ran as the owner, so a private unit's text was shown to anyone."""
    mine = mem.remember(**fact("acme", "zqanaprivate", persona="ana", visibility=V.VISIBILITY_PRIVATE)).token
    newer = mem.remember(**fact("acme", "zqananewer", persona="ana", visibility=V.VISIBILITY_PRIVATE),
                         supersedes=mine).token
    doubt = mem.remember(**fact("acme", "zqanadoubt", persona="ana", visibility=V.VISIBILITY_PRIVATE,
                                confidence=0.4)).token
    shared = mem.remember(**fact("acme", "zqshared", confidence=0.4)).token
    conn.execute("UPDATE memory_units SET conflicts_with = (SELECT id FROM memory_units WHERE number = 1) "
                 "WHERE number = 4")
    ana, bo = Actor.reader("acme", "ana"), Actor.reader("acme", "bo")
    for reader in (None, bo):
        assert mem.unit("acme", mine, actor=reader) is None
        with pytest.raises(ValidationError, match=r"^token: no unit"):
            mem.history("acme", newer, actor=reader)
        queue = mem.review_queue("acme", actor=reader)
        assert [(r["token"], r["conflicts_with"], r["conflict_title"]) for r in queue] == [(shared, None, None)]
        assert mem.stats("acme", actor=reader)["units_by_status"] == {"review": 1}
        assert "zqana" not in mem.prompt_block("acme", query="deploy pipeline", actor=reader)
    assert mem.unit("acme", mine, actor=ana)["title"] == "Deploy note zqanaprivate"
    assert [link["token"] for link in mem.history("acme", newer, actor=ana)] == [mine, newer]
    assert {r["token"] for r in mem.review_queue("acme", actor=ana)} == {doubt, shared}
    assert mem.review_queue("acme", actor=ana)[-1]["conflict_title"] == "Deploy note zqanaprivate"
    assert mem.stats("acme", actor=ana)["units_by_status"] == {"active": 1, "review": 2, "superseded": 1}
    assert mem.stats(actor=Actor.reader("other"))["units_by_status"] == {}


def test_a_reader_naming_no_persona_sees_no_private_unit_not_even_of_persona_api(mem, conn, embedder):
    """Regression: the default reader was called "api", so persona api's private units were everyone's."""
    token = mem.remember(**fact("acme", "zqapiprivate", persona="api", visibility=V.VISIBILITY_PRIVATE)).token
    embed_all(conn, embedder)
    for reader in (None, Actor.reader("acme"), Actor.for_project("acme"), Actor("", read=("acme",))):
        assert [h.token for h in mem.recall("acme", "deploy pipeline zqapiprivate", actor=reader)] == []
        assert mem.unit("acme", token, actor=reader) is None
        assert mem.prompt_block("acme", query="deploy pipeline zqapiprivate", actor=reader) == ""
    api = Actor.reader("acme", "api")
    assert [h.token for h in mem.recall("acme", "deploy pipeline zqapiprivate", actor=api)] == [token]
    assert mem.unit("acme", token, actor=api)["title"] == "Deploy note zqapiprivate"


OWNERS_FUNCTIONS = """
    SELECT p.oid::regprocedure::text, p.proconfig FROM pg_proc p
    WHERE p.pronamespace = 'public'::regnamespace AND p.prosecdef
      AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                      AND d.deptype = 'e')"""


def test_every_function_run_as_the_owner_searches_the_sessions_temporary_schema_last(conn):
    """A SECURITY DEFINER function runs as the owner; with search_path = public alone PostgreSQL searches the
    session's temporary schema first for tables and views, so a caller's temporary object could stand in for the
    table the function reads or writes, and a caller's function in public for a pg_catalog one (sql/027)."""
    functions = dict(conn.execute(OWNERS_FUNCTIONS).fetchall())
    assert set(functions) >= {"memory_text_matches(text,text[])", "memory_text_matches(text,text[],text[])",
                              "memory_text_counts(text,text[])", "memory_text_audiences(text,text[])",
                              "memory_units_journal()",
                              "memory_units_journal_inserts()", "memory_units_forget_vectors()",
                              "memory_sources_audience()", "memory_sources_changed()", "memory_canon_changed()"}
    assert [name for name, config in functions.items()
            if "search_path=pg_catalog, public, pg_temp" not in (config or [])] == []
    # and no caller's function in public can be a closer match than pg_catalog's for a call inside them
    assert conn.execute("SELECT has_schema_privilege(%s, 'public', 'CREATE')", (V.APP_ROLE,)).fetchone()[0] is False


def test_a_callers_temporary_view_or_table_never_stands_in_for_a_table_the_owner_reads_or_writes(mem, conn):
    """An attacker's review of sql/027: as memory_app, a temporary view named memory_units (every unit of every
    project, private ones too, all made to match) was read by memory_text_matches as the owner, with the owner's
    rights for any function the view called; a temporary table named memory_changes took the journal trigger's rows,
    and a trigger on it ran the writer's code as the owner. Both now reach the real tables."""
    mem.remember(**fact("acme", "zqkettle"))
    mem.remember(**fact("acme", "zqkettleprivate", persona="ana", visibility=V.VISIBILITY_PRIVATE))
    mem.remember(**fact("beta", "zqkettleother"))
    journal = "SELECT count(*) FROM public.memory_changes WHERE project = 'acme'"
    journalled = conn.execute(journal).fetchone()[0]
    with authz.scoped(conn, Actor("cy", read=("acme",), write=("acme",))):
        conn.execute("CREATE TEMP VIEW memory_units WITH (security_invoker = true) AS "
                     "SELECT id, 'acme'::text AS project, number, type, kind, status, NULL::text[] AS private_to, "
                     "valid_from, valid_until, expired_at, paths, to_tsvector('english', 'pipeline') AS tsv "
                     "FROM public.memory_units")
        found = conn.execute("SELECT count(*) FROM memory_text_matches('acme', ARRAY['pipeline'])").fetchone()[0]
        counted = conn.execute("SELECT matches FROM memory_text_counts('acme', ARRAY['pipeline'])").fetchone()[0]
        conn.execute("CREATE TEMP TABLE memory_changes (seq bigserial, unit_id uuid, project text, revision integer,"
                     " status text, change text, xid xid8 DEFAULT pg_current_xact_id(), at timestamptz DEFAULT now())")
        updated = conn.execute("UPDATE public.memory_units SET revision = revision + 1 WHERE project = 'acme'"
                               " AND private_to IS NULL").rowcount
        taken = conn.execute("SELECT count(*) FROM pg_temp.memory_changes").fetchone()[0]
        conn.execute("DROP VIEW pg_temp.memory_units")
        conn.execute("DROP TABLE pg_temp.memory_changes")
    assert found == counted == 1  # acme's one shared unit: not ana's private one, nor beta's
    assert updated == 1 and taken == 0
    assert conn.execute(journal).fetchone()[0] == journalled + 1


def test_every_memory_table_forces_row_level_security(conn):
    """Regression: RLS was enabled but not forced, so an owner that is no superuser read every row unchecked."""
    tables = conn.execute(
        "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        f"WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relname NOT IN {MIGRATION_RECORDS}").fetchall()
    assert len(tables) >= 19
    assert [name for name, enabled, forced in tables if not (enabled and forced)] == []
    owner_policies = {row[0] for row in conn.execute(
        "SELECT tablename FROM pg_policies WHERE policyname = 'owner_maintenance'")}
    assert owner_policies == {name for name, _, _ in tables}


def test_a_scoped_writer_inserts_no_unit_and_no_source(mem, conn):
    """Regression (an attacker's pass): memory_app could insert units and sources, checked by project alone. A writer
    without the forget scope inserted a tombstone with a fact's content hash (every later write of that fact refused
    as forgotten, no forget audited), and a source inserted for another persona's private unit, which it cannot read,
    made the owner-run audience trigger publish that unit. No request path inserts either as the role: both are
    refused now, and the fact and the private unit stay as they were."""
    fact = dict(project="acme", kind="env", type="semantic", title="Relay vendor", body="The relay is from Ostwind.")
    private = mem.remember(**{**fact, "title": "Bo's plan", "body": "Bo moves to Kiel in May."}, persona="bo",
                           visibility="private")
    private_id = conn.execute("SELECT id FROM memory_units").fetchone()[0]
    writer = Actor.for_project("acme", "mallory")  # read and write, no forget
    tombstone = ("INSERT INTO memory_units (project, number, type, kind, title, body, status, confidence, importance, "
                 "trust, content_hash) VALUES ('acme', 99, 'semantic', 'env', '', '', 'forgotten', 0.5, 0.5, 0.5, %s)")
    source = ("INSERT INTO memory_sources (unit_id, project, feed, task_id, visibility) "
              "VALUES (%s, 'acme', 'agent', 'T-1', 'project')")
    for sql, params in ((tombstone, (memory_assets.gates.content_hash("env", fact["title"], fact["body"]),)),
                        (source, (private_id,))):
        with mem.connection() as scoped_conn, pytest.raises(psycopg.errors.InsufficientPrivilege), \
                authz.scoped(scoped_conn, writer):
            scoped_conn.execute(sql, params)
    assert mem.remember(**fact).status == "active"
    assert conn.execute("SELECT private_to FROM memory_units WHERE id = %s", (private_id,)).fetchone()[0] == ["bo"]
    assert mem.unit("acme", private.token) is None  # a reader naming no persona still cannot see it


@pytest.fixture
def non_superuser_owner(clean):
    """A second database on the same server, owned (tables, migrations) by a role that is no superuser, as on a
    managed PostgreSQL; dropped afterwards."""
    name = f"iso_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(clean, autocommit=True) as admin:
        admin.execute("DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'iso_owner') THEN "
                      "CREATE ROLE iso_owner LOGIN NOSUPERUSER NOBYPASSRLS; END IF; END $$")
        for role in (V.APP_ROLE, V.READER_ROLE):  # what a DBA grants the application's owner once
            admin.execute(f"GRANT {role} TO iso_owner WITH ADMIN OPTION")
        admin.execute(f"CREATE DATABASE {name} OWNER iso_owner")
    with psycopg.connect(database.with_database(clean, name), autocommit=True) as admin:
        admin.execute("CREATE EXTENSION vector")  # not a trusted extension: the DBA installs it
    info = psycopg.conninfo.conninfo_to_dict(database.with_database(clean, name))
    info["user"] = "iso_owner"
    url = psycopg.conninfo.make_conninfo("", **info)
    yield url
    with psycopg.connect(clean, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_forced_rls_keeps_the_maintenance_path_of_a_non_superuser_owner(non_superuser_owner, embedder, monkeypatch,
                                                                        today):
    """On a server whose owner is no superuser, FORCE applies to the owner: the migrations, the write path and
    every asset of the graph (with its checks) still work through the owner's own policy, while requests stay
    scoped; without that policy the owner would read nothing."""
    import dagster as dg

    from memory_assets.defs import runner
    from memory_assets.defs.delivery.assets import compiled_bundles
    from memory_assets.defs.partitions import PROJECTS as PROJECT_PARTITIONS
    from memory_assets.resources import PostgresResource, postgres

    url = non_superuser_owner
    mem = memory_assets.connect(url)
    try:
        with mem.connection() as conn:
            assert conn.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
                                ).fetchone()[0] is False
        mine = mem.remember(**fact("acme", "zqextprivate", persona="ana", visibility=V.VISIBILITY_PRIVATE)).token
        for i in range(6):  # a week of similar episodes for consolidation
            mem.remember(project="acme", kind="note", type="episodic", title=f"Standup {i}",
                         body=f"At the standup the team reviewed the deploy pipeline and the release train, day {i}.")
        mem.remember(**fact("acme", "zqextshared"))
        mem.remember(**fact("beta", "zqextbeta"))

        resources = {**(runner.code_location().resources or {}), "postgres": PostgresResource(database_url=url)}
        definitions = runner.code_location()
        everything = [a for a in definitions.assets or [] if isinstance(a, dg.AssetsDefinition)]
        everything += list(definitions.asset_checks or [])
        instance = dg.DagsterInstance.ephemeral()

        def run(key: dg.AssetKey, partition: str) -> dg.ExecuteInJobResult:
            selection = dg.AssetSelection.assets(key) | dg.AssetSelection.checks_for_assets(key)
            return dg.materialize(everything, selection=selection, instance=instance, resources=resources,
                                  partition_key=partition, raise_on_error=True)

        day = today
        results = [run(key, partition) for key, partition in runner.graph_steps(day, V.DEFAULT_SERVING_MODEL)]
        instance.add_dynamic_partitions(PROJECT_PARTITIONS, ["acme", "beta"])
        results += [run(compiled_bundles.key, project) for project in ("acme", "beta")]
        assert all(r.success for r in results)
        failed = [e.check_name for r in results for e in r.get_asset_check_evaluations() if not e.passed]
        assert failed == []

        with mem.connection() as conn:
            assert conn.execute("SELECT count(*) FROM memory_embeddings").fetchone()[0] >= 9
            assert conn.execute("SELECT count(*) FROM consolidation_clusters").fetchone()[0] == 1
            assert conn.execute("SELECT count(*) FROM decay_scores").fetchone()[0] >= 9
            assert conn.execute("SELECT count(*) FROM memory_bundles").fetchone()[0] == 2
        assert mem.unit("acme", mine) is None
        assert mem.unit("acme", mine, actor=Actor.reader("acme", "ana"))["title"] == "Deploy note zqextprivate"
        titles = [h.title for h in mem.recall("acme", "deploy pipeline zqextbeta zqextprivate", k=20)]
        assert "Deploy note zqextshared" in titles and not [t for t in titles if "zqextbeta" in t or "priv" in t]
        monkeypatch.setenv(V.OPERATORS_ENV, "alice")
        mem.forget("acme", mine, Actor.operator("acme", "alice"), reason="asked")
        with mem.connection() as conn:
            assert conn.execute("SELECT status FROM memory_units WHERE number = 1 AND project = 'acme'"
                                ).fetchone()[0] == V.STATUS_FORGOTTEN
            # FORCE bites: without the policies it holds (its own, and the analysts' role it may switch to) the
            # owner sees nothing; the request role's policies apply to it too, with no scope set: no row
            with conn.transaction(force_rollback=True):
                conn.execute("DROP POLICY owner_maintenance ON memory_units")
                conn.execute("DROP POLICY analyst_read ON memory_units")
                assert conn.execute("SELECT count(*) FROM memory_units").fetchone()[0] == 0
            assert conn.execute("SELECT count(*) FROM memory_units").fetchone()[0] >= 9
    finally:
        mem.close()
        cached = postgres._MEMORIES.pop((url, None), None)
        if cached is not None:
            cached.close()


def test_the_query_is_encoded_before_the_transaction_opens(mem, conn, embedder, clean):
    """Regression: the encoder ran inside the scoped transaction, so a slow model held a connection idle in a
    transaction; now nothing of the request is open while an encoder that does not say its model is loaded
    encodes (a loaded one encodes beside the full-text leg: tests/recall/test_search.py)."""
    token = mem.remember(**fact("acme", "zqencoded")).token
    embed_all(conn, embedder)
    seen: list[tuple[Any, int]] = []

    def encoder(model_key: str, query: str) -> Any:
        with psycopg.connect(clean, autocommit=True) as probe:
            open_transactions = probe.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND state LIKE 'idle in transaction%%'").fetchone()[0]
        seen.append((conn.info.transaction_status, open_transactions))
        return embedder.encode([query])[0]

    result = recall.recall(conn, "acme", "deploy pipeline zqencoded", encoder=encoder)
    assert result.mode == "hybrid" and [h.token for h in result] == [token]
    assert seen == [(psycopg.pq.TransactionStatus.IDLE, 0)]
    pooled = Memory(mem.pool, mem.url, encoder=encoder)  # the API's pooled path as well
    assert [h.token for h in pooled.recall("acme", "deploy pipeline zqencoded")] == [token]
    assert seen[-1][1] == 0


def test_a_serving_model_switched_while_encoding_degrades_to_full_text(mem, conn, embedder):
    """The vector was encoded for the model read before the transaction; if another worker switched the serving
    model meanwhile, recall serves full text with a note instead of comparing vectors of two models."""
    token = mem.remember(**fact("acme", "zqswitched")).token
    embed_all(conn, embedder)

    def switching_encoder(model_key: str, query: str) -> Any:
        mem.set_serving_model(T2)
        return embedder.encode([query])[0]

    result = recall.recall(conn, "acme", "deploy pipeline zqswitched", encoder=switching_encoder)
    assert result.mode == "sparse_only" and [h.token for h in result] == [token]
    assert any(T2 in note for note in result.notes)


def test_cli_forget_refuses_unless_its_actor_is_a_listed_operator(mem, monkeypatch):
    """Regression: the CLI gave every caller the forget scope; now only an operator the deployment lists in
    MEMORY_ASSETS_OPERATORS may forget (exit 2 naming the setting otherwise, nothing changed)."""
    token = mem.remember(**fact("acme", "zqforget")).token
    command = ["forget", token, "--project", "acme", "--reason", "asked"]
    monkeypatch.delenv(V.OPERATORS_ENV, raising=False)
    for extra in ([], ["--actor", "alice"]):
        refused = CliRunner().invoke(main, command + extra)
        assert refused.exit_code == 2 and V.OPERATORS_ENV in refused.stderr
    monkeypatch.setenv(V.OPERATORS_ENV, "alice, bob")
    for extra in ([], ["--actor", "mallory"], ["--actor", "alice,bob"]):
        refused = CliRunner().invoke(main, command + extra)
        assert refused.exit_code == 2 and V.OPERATORS_ENV in refused.stderr, extra
    assert mem.unit("acme", token)["status"] == V.STATUS_ACTIVE
    done = CliRunner().invoke(main, [*command, "--actor", "bob", "--json"])
    assert done.exit_code == 0, done.output
    with mem.connection() as conn:
        assert conn.execute("SELECT status FROM memory_units").fetchone()[0] == V.STATUS_FORGOTTEN
        assert conn.execute("SELECT actor FROM audit_log WHERE action = 'forget'").fetchone()[0] == "bob"
    with pytest.raises(ScopeError, match=V.OPERATORS_ENV):
        Actor.operator("acme", "mallory")
    assert authz.operators() == {"alice", "bob"}


def test_the_python_api_forgets_only_as_an_operator_the_deployment_lists(mem, monkeypatch):
    """Regression: Memory.forget trusted the forget scope of any Actor an in-process caller built for itself; now,
    like the CLI and the MCP server, it needs a name listed in MEMORY_ASSETS_OPERATORS (and the scope too)."""
    token = mem.remember(**fact("acme", "zqapiforget")).token
    self_made = Actor.for_project("acme", "alice", forget=True)
    monkeypatch.delenv(V.OPERATORS_ENV, raising=False)
    for actor in (self_made, Actor(V.NO_PERSONA, read=("acme",), forget=("acme",))):
        with pytest.raises(ScopeError, match=V.OPERATORS_ENV):
            mem.forget("acme", token, actor, reason="asked")
    monkeypatch.setenv(V.OPERATORS_ENV, "bob")
    with pytest.raises(ScopeError, match=V.OPERATORS_ENV):
        mem.forget("acme", token, self_made, reason="asked")
    with pytest.raises(ScopeError, match="no forget scope"):  # listed, but an actor without the scope
        mem.forget("acme", token, Actor("bob", read=("acme",)), reason="asked")
    status = "SELECT status FROM memory_units WHERE project = 'acme'"
    with mem.connection() as conn:
        assert conn.execute(status).fetchone()[0] == V.STATUS_ACTIVE
        mem.forget("acme", token, Actor.operator("acme", "bob"), reason="asked")
        assert conn.execute(status).fetchone()[0] == V.STATUS_FORGOTTEN


SCOPE_IN_FORCE = "current_setting('memory.read', true), current_user = session_user"  # whose scopes, and the owner?


def test_a_scope_nested_in_a_pipelined_one_keeps_the_outer_transaction(conn):
    """libpq says IDLE inside a pipelined transaction until its next sync: a scope opened inside one after a fetch
    took itself for the outermost, sent a second BEGIN and its COMMIT ended the outer transaction early; it now runs
    inside it and hands the outer scope's settings back at its end (not the owner's role, which reads every
    project), and the outer commits once."""
    state = f"SELECT pg_current_xact_id()::text, current_setting('transaction_isolation'), {SCOPE_IN_FORCE}"
    with conn.pipeline(), authz.scoped(conn, Actor.reader("alpha"), one_snapshot=True):
        before = conn.execute(state).fetchone()
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE  # what libpq says meanwhile
        with authz.scoped(conn, Actor.reader("beta"), one_snapshot=True):
            inner = conn.execute(state).fetchone()
        after = conn.execute(state).fetchone()
    assert before[:2] == after[:2] == inner[:2] and before[1] == "repeatable read"
    assert (before[2:], inner[2:], after[2:]) == (("alpha", False), ("beta", False), ("alpha", False))
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert conn.execute("SELECT current_user = session_user").fetchone() == (True,)


def test_a_scope_nested_in_a_transaction_hands_back_the_enclosing_scope_or_none(conn):
    """SET LOCAL outlives a nested block: at its end the enclosing scope's role and scopes come back, and where no
    scope encloses it, none (the connection's own role, for the transaction's rest)."""
    state = f"SELECT {SCOPE_IN_FORCE}"
    with conn.transaction():
        with authz.scoped(conn, Actor.reader("alpha")):
            with authz.scoped(conn, Actor.reader("beta")):
                assert conn.execute(state).fetchone() == ("beta", False)
            assert conn.execute(state).fetchone() == ("alpha", False)
        assert conn.execute(state).fetchone() == ("", True)


@pytest.mark.parametrize("fetched", [False, True], ids=["before-any-fetch", "after-a-fetch"])
def test_a_nested_scope_that_raises_inside_a_pipelined_one_leaves_the_outer_scope_in_force(conn, fetched):
    """A caller that catches an error of a nested scope goes on under its own scope: the nested block runs in a
    savepoint that the error rolls back, its SET LOCAL with it (without one, the rest ran as the nested actor, or
    as the owner)."""
    state = f"SELECT {SCOPE_IN_FORCE}"
    with conn.pipeline(), authz.scoped(conn, Actor.reader("alpha")):
        if fetched:
            conn.execute("SELECT 1").fetchone()
        with pytest.raises(ValueError), authz.scoped(conn, Actor.reader("beta")):
            raise ValueError("the caller catches this")
        with pytest.raises(psycopg.errors.DivisionByZero), authz.scoped(conn, Actor.reader("beta")):
            conn.execute("SELECT 1 / 0").fetchone()
        assert conn.execute(state).fetchone() == ("alpha", False)
    assert conn.execute(state).fetchone() == ("", True)
