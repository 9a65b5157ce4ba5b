"""Hybrid recall end to end on the real store: legs, filters before LIMIT, as_of, RLS, visibility, cues."""

import itertools
import math
import random
import re
import time
from datetime import UTC, datetime, timedelta

import pgvector.psycopg
import psycopg
import pytest

import memory_assets
from bench.recall_stages import round_trips
from memory_assets import authz, curation, database, embeddings, gates, lifecycle
from memory_assets import vocabulary as V
from memory_assets.errors import ValidationError
from memory_assets.recall import expansion, recall
from memory_assets.recall.legs import (
    CONTEXT_COLUMNS,
    candidates,
    candidates_while_encoding,
    merged,
    received,
    seedable,
    statement_params,
    unpack,
)
from memory_assets.recall.request import request_params, tsquery_terms
from tests.cases import READS_ITS_SOURCES, T2, embed_all, service_facts
from tests.cases import SERVING_MODEL as T1


def note(mem, project, title, body, **kw):
    return mem.remember(project=project, kind="note", type="semantic", title=title, body=body, **kw)


HYBRID_FIXTURE = [
    ("Kettle maintenance", "Kettle ZX-81 needs descaling once a month."),                             # the answer
    ("Invoice archive", "Invoice 2231 for asset ZX-81: descaling fee, ZX-81 freight, ZX-81 VAT, vendor Muller GmbH, "
                        "payment terms net 30, cost centre 4410, tax year 2019."),                  # lexical only
    ("How often must the ZX81 be decalcified", "Nobody has written the ZX81 schedule down."),       # semantic only
    ("ZX81 decalcification interval", "The ZX81 decalcification interval is not documented."),     # semantic only
    ("Boiler upkeep", "Mineral build-up in water boilers is removed with citric acid."),
    ("Parking", "Visitors park on level two of the garage next door, bay K7 is reserved for deliveries."),
]


QUERY = "how frequently must the ZX-81 get descaled"


def test_hybrid_beats_either_leg_alone(mem, conn, embedder):
    tokens = [note(mem, "acme", t, b).token for t, b in HYBRID_FIXTURE]
    embed_all(conn, embedder)
    rank = {}
    for legs in ("hybrid", "dense", "sparse"):
        hits = [h.token for h in mem.recall("acme", QUERY, k=len(tokens), legs=legs)]
        rank[legs] = hits.index(tokens[0])
    assert rank["hybrid"] == 0 and rank["dense"] > 0 and rank["sparse"] > 0, rank


def test_every_hit_has_citations_and_components(mem, conn, embedder):
    for i, (title, body) in enumerate(HYBRID_FIXTURE):
        note(mem, "acme", title, body, task_id=f"T-{i}", session_id="S-1", observed_sha="abc123")
    embed_all(conn, embedder)
    result = mem.recall("acme", QUERY, k=5)
    assert result.mode == "hybrid" and len(result) == 5
    for hit in result:
        assert hit.citations and hit.citations[0]["task_id"].startswith("T-")
        assert hit.citations[0]["commit"] == "abc123" and hit.citations[0]["session_id"] == "S-1"
        assert set(hit.components) >= {"dense", "sparse", "rrf", "importance", "recency", "trust"}
        assert 0 <= hit.score <= 1


def test_filters_apply_before_limit(mem, conn, embedder):
    # ten near-identical facts, all superseded, sit closest to the query; k active hits must still come back
    for i in range(10):
        old = note(mem, "acme", f"Deploy window {i}", f"Deploys to production happen on Tuesday slot {i}.")
        new = note(mem, "acme", f"Unrelated fact {i}", f"Cafeteria menu item {i} is served on Fridays.")
        lifecycle.supersede(conn, new.unit_id, old.unit_id)
    embed_all(conn, embedder)
    hits = mem.recall("acme", "when do deploys to production happen", k=5, legs="dense")
    assert len(hits) == 5 and all(h.title.startswith("Unrelated") for h in hits)
    assert all(h.status == "active" for h in hits)


def test_kind_type_and_path_filters(mem, conn, embedder):
    mem.remember(project="acme", kind="env", type="semantic", title="Staging TLS", paths=["infra/staging/db.tf"],
                 body="Staging PostgreSQL requires sslmode=require because the proxy refuses plain TCP.")
    mem.remember(project="acme", kind="qa", type="semantic", title="Why TLS on staging?",
                 body="Because the proxy in front of staging PostgreSQL refuses plain TCP connections.")
    embed_all(conn, embedder)
    assert {h.kind for h in mem.recall("acme", "staging postgres tls", kinds=["env"])} == {"env"}
    assert [h.kind for h in mem.recall("acme", "staging postgres tls", paths=["infra/"])] == ["env"]
    assert mem.recall("acme", "staging postgres tls", types=["episodic"]).hits == []
    with pytest.raises(ValidationError, match="kinds"):
        mem.recall("acme", "x", kinds=["decision"])
    with pytest.raises(ValidationError, match="k:"):
        mem.recall("acme", "x", k=0)


def test_as_of_follows_supersession(mem, conn, embedder):
    old = note(mem, "acme", "VPN rollout deferred to Q3", "The VPN rollout was deferred to Q3.")
    before = datetime.now(UTC)
    new = note(mem, "acme", "VPN rollout cancelled", "The VPN rollout was cancelled for good.")
    with conn.transaction():
        lifecycle.supersede(conn, new.unit_id, old.unit_id)
    embed_all(conn, embedder)
    conn.execute("UPDATE memory_units SET valid_from = %s WHERE id = %s",
                 (before + timedelta(microseconds=1), new.unit_id))
    now_titles = [h.title for h in mem.recall("acme", "VPN rollout status", k=5)]
    then_titles = [h.title for h in mem.recall("acme", "VPN rollout status", k=5, as_of=before)]
    assert now_titles == ["VPN rollout cancelled"]
    assert then_titles == ["VPN rollout deferred to Q3"]
    with pytest.raises(ValidationError, match="as_of"):
        mem.recall("acme", "VPN", as_of=datetime(2020, 1, 1))


CRAFTED = ["' OR 1=1 --", "beta'); SELECT * FROM memory_units; --", "project = 'beta'", "secret beta launch plan",
           "*", "beta | launch & !x", "%", "\\' OR project LIKE '%"]


def test_rls_scoped_caller_never_sees_another_project(mem, conn, embedder):
    note(mem, "alpha", "Alpha launch plan", "Alpha launches in March with three partners.")
    note(mem, "beta", "Beta secret launch plan", "Beta launches secretly in April with one partner.")
    embed_all(conn, embedder)
    alpha_only = authz.Actor(name="agent-a", read=("alpha",))
    for query in CRAFTED:
        for project in ("alpha", "beta"):
            for legs in ("hybrid", "dense", "sparse"):
                hits = mem.recall(project, query, k=10, actor=alpha_only, legs=legs)
                assert all(h.token and "Beta" not in h.title for h in hits), (query, project, legs)
                if project == "beta":
                    assert hits.hits == []


def test_rls_as_the_non_owner_role_in_sql(mem, clean, embedder):
    note(mem, "alpha", "Alpha fact", "Alpha runs on Mondays.", task_id="T-a")
    note(mem, "beta", "Beta fact", "Beta runs on Tuesdays.", task_id="T-b")
    with psycopg.connect(clean, autocommit=True) as raw:
        with authz.scoped(raw, authz.Actor(name="a", read=("alpha",))):
            assert raw.execute("SELECT current_user").fetchone()[0] == "memory_app"
            assert raw.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles "
                               "WHERE rolname = current_user").fetchone() == (False,)
            assert raw.execute("SELECT DISTINCT project FROM memory_units").fetchall() == [("alpha",)]
            assert raw.execute("SELECT DISTINCT project FROM memory_sources").fetchall() == [("alpha",)]
            assert raw.execute("SELECT count(*) FROM memory_units WHERE project = 'beta'").fetchone() == (0,)
        with (pytest.raises(psycopg.errors.InsufficientPrivilege),
              authz.scoped(raw, authz.Actor(name="a", read=("alpha",)))):
            raw.execute("SELECT count(*) FROM memory_inbox")
        writer = authz.Actor(name="a", read=("alpha",), write=("alpha",))
        with authz.scoped(raw, writer):
            assert raw.execute("UPDATE memory_units SET importance = 0.9 WHERE true").rowcount == 1
        with pytest.raises(psycopg.errors.InsufficientPrivilege), authz.scoped(raw, writer):  # tombstoning needs forget
            raw.execute("UPDATE memory_units SET status = 'forgotten', title = '', body = '' WHERE project = 'alpha'")
        # after a scoped block the connection is the owner again, whether the block committed or was nested
        assert raw.execute("SELECT current_user, current_setting('memory.read', true)").fetchone() == ("postgres", "")
        with raw.transaction():
            with authz.scoped(raw, authz.Actor(name="a", read=("alpha",))):
                assert raw.execute("SELECT count(*) FROM memory_units").fetchone() == (1,)
            assert (raw.execute("SELECT current_user, current_setting('memory.read', true)").fetchone()
                    == ("postgres", ""))
            assert raw.execute("SELECT count(*) FROM memory_units").fetchone() == (2,)


def test_sparse_only_when_the_model_is_absent(mem, conn, clean, embedder):
    note(mem, "acme", "Staging TLS", "Staging PostgreSQL requires sslmode=require.")
    embed_all(conn, embedder)

    def broken(model_key, query):
        raise OSError("model files missing")

    no_model = memory_assets.Memory(mem.pool, mem.url, encoder=lambda m, q: memory_assets.api.encode_query("nope", q))
    result = no_model.recall("acme", "staging sslmode")
    assert result.mode == "sparse_only" and [h.title for h in result] == ["Staging TLS"]
    # a new serving model that has no vectors yet also degrades instead of failing
    mem.set_serving_model("minilm-l6@gt0.1-t2")
    result = mem.recall("acme", "staging sslmode")
    assert result.mode == "sparse_only" and result.notes and len(result) == 1


def test_the_sparse_leg_scores_a_match_by_the_idf_of_the_query_terms_it_contains(mem):
    """A rare query word outweighs a common one however often the common one repeats (ts_rank alone would not)."""
    for i in range(6):
        note(mem, "acme", f"Deploy checklist {i}",
             f"Deploy step {i}: deploy, then deploy again and read the deploy log.")
    rare = note(mem, "acme", "Zebra crossing", "The zebra crossing outside the office is repainted in May.")
    hits = mem.recall("acme", "deploy zebra", k=7, legs="sparse")
    idf = lambda df: math.log(1 + (7 - df + 0.5) / (df + 0.5))  # noqa: E731 -- N = 7, the project's units
    assert hits[0].token == rare.token and hits[0].components["sparse"] == pytest.approx(idf(1), abs=1e-6)
    assert [h.components["sparse"] for h in hits[1:]] == pytest.approx([idf(6)] * 6, abs=1e-6)
    # two words of the query that stem alike are one term: its idf counts each matching unit once, not twice
    stemmed = mem.recall("acme", "deploys deploy zebra", k=7, legs="sparse")
    assert [(h.token, h.components["sparse"]) for h in stemmed] == [(h.token, h.components["sparse"]) for h in hits]


def test_the_hnsw_path_serves_the_same_filtered_hits_or_falls_back(mem, conn, embedder, monkeypatch):
    for i in range(10):
        old = note(mem, "acme", f"Deploy window {i}", f"Deploys to production happen on Tuesday slot {i}.")
        new = note(mem, "acme", f"Unrelated fact {i}", f"Cafeteria menu item {i} is served on Fridays.")
        lifecycle.supersede(conn, new.unit_id, old.unit_id)
    embed_all(conn, embedder)
    embeddings.ensure_model_index(conn, embeddings.model_spec(T1))
    exact = [h.token for h in mem.recall("acme", "when do deploys to production happen", k=5, legs="dense")]
    monkeypatch.setattr(V, "HNSW_MIN_PROJECT_UNITS", 0)
    approximate = [h.token for h in mem.recall("acme", "when do deploys to production happen", k=5, legs="dense")]
    assert approximate == exact and len(exact) == 5


def test_the_hnsw_path_is_planned_once_and_walks_the_index_beside_many_projects(mem, conn, embedder, monkeypatch):
    """A store of many projects made the planner sort a big project's every vector instead of walking the index (row-
    level security's `project = ANY (scopes)` made it guess the project small: 23 against 9.6 ms at 10,000 units), and
    hash all its units to join the walk. The walk is a function planned with sorting off, each walked vector one
    primary-key probe, and the statement planned once per connection and project: the same hits as the exact path."""
    for i in range(12):
        note(mem, "acme", f"Deploy window {i}", f"Deploys to production happen on Tuesday slot {i}.")
    for i in range(40):
        note(mem, f"small-{i}", f"Lunch menu {i}", f"The cafeteria serves soup number {i} on Fridays.")
    embed_all(conn, embedder)
    embeddings.ensure_model_index(conn, embeddings.model_spec(T1))
    conn.execute("ANALYZE memory_embeddings, memory_units")  # the statistics the plan reads, not the whole store's
    question = "when do deploys to production happen"
    encode = lambda model, text: embedder.encode([text])[0]  # noqa: E731
    exact = [h.token for h in recall(conn, "acme", question, k=5, legs="dense", encoder=encode)]
    monkeypatch.setattr(V, "HNSW_MIN_PROJECT_UNITS", 10)
    for _ in range(6):
        walked = [h.token for h in recall(conn, "acme", question, k=5, legs="dense", encoder=encode)]
        assert walked == exact and len(exact) == 5
    text = database.with_project_literal(embeddings.model_query("recall/candidates", T1), "acme")
    plans = conn.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = %s",
                         (database.positional(text)[0],)).fetchall()
    assert plans == [(6, 0)]  # the project's own plan for every run after the first, which found it has units
    with authz.scoped(conn, authz.Actor.reader("acme")):
        generic = "\n".join(row[0] for row in conn.execute("EXPLAIN (GENERIC_PLAN) " + database.positional(text)[0]))
    walk = generic[generic.index("CTE dense_walked"): generic.index("CTE dense_exact")]
    assert "Function Scan on memory_hnsw_walk" in walk and "Hash" not in walk, walk


def test_the_index_walk_reads_as_its_caller_and_quotes_the_model(mem, conn, embedder):
    """memory_hnsw_walk runs under the caller's row-level security (another project's vectors never come back, whatever
    project it is asked for), with sorting off, and a hostile model key stays a quoted literal."""
    note(mem, "acme", "Deploy window", "Deploys happen on Tuesdays.")
    note(mem, "other", "Secret plan", "The other team's launch is on Monday.")
    embed_all(conn, embedder)
    vector = embedder.encode(["deploys"])[0]
    walk = "SELECT count(*) FROM memory_hnsw_walk(%s, %s, 384, %s::vector, 10, 1, 0)"
    with authz.scoped(conn, authz.Actor.reader("acme")):
        assert conn.execute(walk, ("acme", T1, vector)).fetchone()[0] == 1
        assert conn.execute(walk, ("other", T1, vector)).fetchone()[0] == 0
        assert conn.execute(walk, ("acme", T1 + "' OR true --", vector)).fetchone()[0] == 0
    assert conn.execute(walk, ("other", T1, vector)).fetchone()[0] == 1  # the owner reads it: the filter was RLS
    config = conn.execute("SELECT proconfig FROM pg_proc WHERE proname = 'memory_hnsw_walk'").fetchone()[0]
    assert config == ["enable_sort=off"]


def test_a_project_with_a_small_share_of_the_store_sorts_its_own_vectors_instead_of_walking(conn):
    """A walk for a small share of the store's vectors passes mostly over other projects' (1,000 units beside 100,000:
    203 ms for 0.79 of the exact top 10): under HNSW_WALK_MIN_SHARE the walk lets the planner sort the project's own;
    a table never analysed (no estimate) walks."""
    conn.execute("CREATE TEMP TABLE reltuples AS SELECT reltuples FROM pg_class WHERE relname = 'memory_embeddings'")
    walks = "SELECT memory_hnsw_walks(%s, %s)"
    try:
        conn.execute("UPDATE pg_class SET reltuples = 100000 WHERE relname = 'memory_embeddings'")
        assert conn.execute(walks, (5_000, V.HNSW_WALK_MIN_SHARE)).fetchone()[0] is False
        assert conn.execute(walks, (10_000, V.HNSW_WALK_MIN_SHARE)).fetchone()[0] is True
        conn.execute("UPDATE pg_class SET reltuples = -1 WHERE relname = 'memory_embeddings'")
        assert conn.execute(walks, (5_000, V.HNSW_WALK_MIN_SHARE)).fetchone()[0] is True
    finally:
        conn.execute("UPDATE pg_class SET reltuples = (SELECT reltuples FROM reltuples) "
                     "WHERE relname = 'memory_embeddings'")


def standup(mem, day, text, session):
    return mem.remember(project="acme", kind="note", type="episodic", title=text, body=text, valid_from=day,
                        session_id=session, persona="lead")


def test_a_named_date_lifts_the_units_of_that_date(mem, conn, embedder):
    today = datetime.now(UTC).replace(hour=9, minute=0, second=0, microsecond=0)
    early, late = today - timedelta(days=20), today - timedelta(days=6)
    api = standup(mem, early, "Standup: we agreed to freeze the public API until the release.", "S-1")
    schema = standup(mem, late, "Standup: we agreed to freeze the database schema until the audit.", "S-2")
    embed_all(conn, embedder)
    for day, expected in ((early, api), (late, schema)):
        named = f"What did we agree to freeze on {day.day} {day.strftime('%B')}, {day.year}?"
        hits = mem.recall("acme", named, k=2)
        assert hits[0].token == expected.token and hits[0].components["time"] == V.TIME_CUE_BOOST
        assert "time" not in hits[1].components


def test_the_best_session_lifts_its_other_units(mem, conn, embedder):
    day = datetime.now(UTC) - timedelta(days=3)
    match = standup(mem, day, "Lead: the nightly backup job writes to the cold storage bucket.", "S-1")
    for i in range(4):  # more than the neighbour window away from the match
        standup(mem, day, f"Lead: agenda item {i} was postponed.", "S-1")
    answer = standup(mem, day, "Lead: it runs at 02:00 UTC and keeps 30 days.", "S-1")
    elsewhere = standup(mem, day, "Lead: the runbook says restores take about an hour.", "S-2")
    embed_all(conn, embedder)
    hits = {h.token: h for h in mem.recall("acme", "nightly backup cold storage bucket", k=10)}
    assert hits[match.token].components["session"] == pytest.approx(V.SESSION_WEIGHT)
    assert hits[answer.token].components["session"] == pytest.approx(V.SESSION_WEIGHT)
    assert elsewhere.token not in hits or hits[elsewhere.token].components.get("session", 0) < V.SESSION_WEIGHT


def test_turns_next_to_a_match_in_its_session_share_its_relevance(mem, conn, embedder):
    """Neighbouring turns (by number, window 2, same session) get a share of a match's relevance; others none."""
    day = datetime.now(UTC) - timedelta(days=3)
    question = standup(mem, day, "Ana: when does the nightly backup of the billing database run?", "S-1")
    answer = standup(mem, day, "Bo: at two in the morning, every day.", "S-1")
    next_door = standup(mem, day, "Cy: the parking garage closes at ten.", "S-2")  # numbers 1 and 2 are in reach
    embed_all(conn, embedder)
    hits = {h.token: h for h in mem.recall("acme", "nightly backup billing database", k=10)}
    assert hits[answer.token].components.get("context", 0) > 0
    assert "context" not in hits[next_door.token].components  # another session, however close its number
    assert list(hits).index(answer.token) < list(hits).index(next_door.token)
    assert hits[question.token].components.get("context", 0) < hits[answer.token].components["context"]


def test_a_private_unit_is_recalled_only_by_the_persona_that_contributed_it(mem, conn, embedder):
    """Visibility is a filter before LIMIT in every leg and in the neighbouring-turn spread, and on citations."""
    day = datetime.now(UTC) - timedelta(days=2)
    shared = mem.remember(project="acme", kind="note", type="episodic", title="Lead: the QX-7 relay was swapped.",
                          body="Lead: the QX-7 relay was swapped.", valid_from=day, session_id="S-1", persona="lead")
    private = mem.remember(project="acme", kind="note", type="episodic", visibility="private",
                           title="Ana: my QX-7 relay password hint is my cat's name.",
                           body="Ana: my QX-7 relay password hint is my cat's name.", valid_from=day,
                           session_id="S-1", persona="ana")
    twice = dict(project="acme", kind="note", type="semantic", title="Relay vendor",
                 body="The QX-7 relay comes from Ostwind.")
    mem.remember(**twice, visibility="private", persona="ana", task_id="T-ana")
    both = mem.remember(**twice, persona="bo", task_id="T-bo")  # the same fact shared by another agent
    embed_all(conn, embedder)
    ana = authz.Actor("ana", read=("acme",))
    for legs in ("hybrid", "dense", "sparse"):
        for actor in (None, authz.Actor("bo", read=("acme",))):
            hits = mem.recall("acme", "QX-7 relay password hint cat", k=10, legs=legs, actor=actor)
            assert private.token not in [h.token for h in hits] and shared.token in [h.token for h in hits], legs
        own = mem.recall("acme", "QX-7 relay password hint cat", k=10, legs=legs, actor=ana)
        assert private.token in [h.token for h in own], legs
    # the private turn sits next to the shared one in session S-1: the neighbouring-turn spread must not add it
    assert private.token in [h.token for h in mem.recall("acme", "swapped", k=10, legs="sparse", actor=ana)]
    assert private.token not in [h.token for h in mem.recall("acme", "swapped", k=10, legs="sparse")]
    for reader, tasks in ((ana, {"T-ana", "T-bo"}), (authz.Actor("bo", read=("acme",)), {"T-bo"})):
        hit = next(h for h in mem.recall("acme", "relay vendor Ostwind", k=3, actor=reader) if h.token == both.token)
        assert {c["task_id"] for c in hit.citations} == tasks, reader.name


def test_another_personas_private_source_does_not_move_a_shared_unit(mem, conn, embedder):
    """Scoring reads only the sources its reader may see: a private source names no persona to anyone else."""
    fact = dict(project="acme", kind="note", type="semantic", title="Relay vendor",
                body="The QX-7 relay comes from Ostwind.")
    mem.remember(**fact, visibility="private", persona="ana", task_id="T-ana")
    shared = mem.remember(**fact, persona="bo", task_id="T-bo")
    embed_all(conn, embedder)
    components = {}
    for reader in ("ana", "bo"):
        hits = mem.recall("acme", "what did ana say about the relay vendor", k=3,
                          actor=authz.Actor(reader, read=("acme",)))
        components[reader] = next(h for h in hits if h.token == shared.token).components
    assert "persona" in components["ana"] and "persona" not in components["bo"], components


def test_as_of_does_not_serve_an_episode_after_its_ttl_expiry(mem, conn, embedder):
    from memory_assets import decay

    lived = datetime.now(UTC) - timedelta(days=V.EPISODIC_TTL_DAYS + 30)
    episode = mem.remember(project="acme", kind="note", type="episodic", title="Deploy incident", valid_from=lived,
                           body="The Friday deploy failed because the cache volume filled up.")
    conn.execute("UPDATE memory_units SET created_at = valid_from")
    embed_all(conn, embedder)
    day = datetime.now(UTC).date() - timedelta(days=10)
    assert decay.score_day(conn, day)["expired"] == 1
    expired_at = mem.unit("acme", episode.token)["expired_at"]
    assert expired_at == datetime.combine(day + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
    query = "deploy failed cache volume"
    assert [h.token for h in mem.recall("acme", query, as_of=expired_at - timedelta(days=1))] == [episode.token]
    assert mem.recall("acme", query, as_of=expired_at).hits == []  # expired at that instant
    assert mem.recall("acme", query, as_of=expired_at + timedelta(days=2)).hits == []
    assert mem.recall("acme", query).hits == []


def test_a_recall_waits_on_the_server_three_times_through_the_api_too(mem, conn, clean, embedder):
    """Through recall(): the serving model (before encoding); then the transaction's BEGIN with its one snapshot
    (one statement: a SET TRANSACTION after it was an eighth), the role and scopes, the request's context and every
    candidate with what scoring reads of it (pipeline mode, one statement); then the cited text with the COMMIT.
    psycopg's transaction() waited after BEGIN and before COMMIT as well (five waits), and ten statements were each
    a round trip before that. Through Memory.recall: the kill switch with the serving model, which is also the
    connection's check (the pool's own check was a fourth wait; the two reads apart, before that, a fifth and
    sixth)."""
    for i, (title, body) in enumerate(HYBRID_FIXTURE):
        mem.remember(project="acme", kind="note", type="episodic", title=title, body=body, session_id="S-1",
                     task_id=f"T-{i}")
    embed_all(conn, embedder)
    conn.commit()

    def encode(model, query):
        return embedder.encode([query])[0]

    results = []
    assert round_trips(conn, lambda: results.append(recall(conn, "acme", QUERY, k=3, encoder=encode))) == (3, 7)
    assert results[0].mode == "hybrid" and len(results[0]) == 3
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE

    with memory_assets.connect(clean, pool_size=1) as one:
        one.encoder = encode
        one.recall("acme", QUERY, k=3)
        with one.connection() as pooled:
            traced = pooled
        waits, _ = round_trips(traced, lambda: results.append(one.recall("acme", QUERY, k=3)))
    assert [h.token for h in results[1]] == [h.token for h in results[0]]
    assert waits == 3


def test_a_failed_pipelined_recall_rolls_back_and_leaves_the_connection_idle(mem, conn, embedder, monkeypatch):
    """BEGIN and COMMIT travel with the statements next to them (authz.pipelined_transaction): an error inside the
    transaction rolls it back, and the connection serves the next request."""
    note(mem, "acme", "Relay", "The relay listens on 8000.")
    embed_all(conn, embedder)
    conn.commit()

    def broken(*args, **kwargs):
        raise RuntimeError("scoring failed")

    with monkeypatch.context() as patched:
        patched.setattr("memory_assets.recall.search.structured", broken)
        with pytest.raises(RuntimeError, match="scoring failed"):
            recall(conn, "acme", "relay port")
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert conn.execute("SELECT current_user = session_user, current_setting('memory.read', true)").fetchone() == (
        True, "")
    with (pytest.raises(psycopg.errors.UndefinedColumn), conn.pipeline(),
          authz.scoped(conn, authz.Actor.reader("acme"))):
        conn.execute("SELECT no_such_column FROM memory_units").fetchall()
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert [h.title for h in recall(conn, "acme", "relay port")] == ["Relay"]


def test_neighbours_are_fetched_for_exactly_the_seedable_candidates(mem, conn, embedder, monkeypatch):
    """The statement fetches turns next to each leg's top CONTEXT_SEED_RANK only, and the seeds come from the same
    set: a seed never lacks its neighbours, and a candidate ranked below it in both legs spreads nothing."""
    monkeypatch.setattr(V, "CONTEXT_SEED_RANK", 3)
    day = datetime.now(UTC) - timedelta(days=3)
    for i in range(12):
        standup(mem, day, f"Lead: the backup check {i} ran against the billing database replica {i}.", "S-1")
    embed_all(conn, embedder)
    vector = memory_assets.api.encode_query(T1, "backup billing database")
    params = request_params("acme", tsquery_terms("backup billing database"), 10, datetime.now(UTC), False,
                            reader="api")
    with authz.scoped(conn, authz.Actor.reader("acme")):
        found = candidates(conn, params, T1, vector, True)
    seeds = seedable(found)
    assert len(found.dense) == len(found.sparse) == 12  # every turn is a candidate in both legs
    assert 3 <= len(seeds) <= 6
    assert {seed for seed, _, _ in found.near} == seeds  # each seedable turn has neighbours in the session
    ranked_low = {row[0] for row in found.dense[3:]} & {row[0] for row in found.sparse[3:]}
    assert ranked_low and not ranked_low & seeds


SOURCES_AS_THE_READER_SEES_THEM = """
SELECT s.unit_id::text,
       array_agg(DISTINCT lower(s.persona)) FILTER (WHERE (s.visibility = 'project' OR s.persona = %(reader)s)
                                                      AND s.persona IS NOT NULL),
       (array_agg(s.session_id ORDER BY s.id) FILTER (WHERE s.visibility = 'project' OR s.persona = %(reader)s))[1],
       array_agg(DISTINCT s.session_id) FILTER (WHERE (s.visibility = 'project' OR s.persona = %(reader)s)
                                                  AND s.session_id IS NOT NULL)
FROM memory_sources s WHERE s.project = 'acme' GROUP BY s.unit_id"""


def test_each_candidates_personas_and_sessions_are_its_sources_as_its_reader_may_see_them(mem, conn):
    """A unit whose one source is the row it was folded from carries that source (sql/024), the others read their
    sources: either way a candidate's personas, session and sessions are what grouping its sources under the
    reader's row-level security gives, for a public origin, a private one, a second source from another task (one
    private), a source without persona or session (it names no persona), a merge's copied sources, a deleted and a
    changed source, and a private unit shared with another persona, who may not see its one source; as readers
    naming no persona, the private one's, another's, and an operator who sees every unit. A unit's one persona and
    session travel as texts, the arrays only where they say more (legs.unpack)."""
    def turn(text, **kw):
        return mem.remember(project="acme", kind="note", type="episodic", title=text[:80], body=text,
                            confidence=0.9, **kw)

    turn("Caroline: the relay runs on port 7000.", task_id="T-1", session_id="S-1", persona="Caroline")
    spare = turn("Ana: the relay spare sits in rack 4.", task_id="T-2", session_id="S-2", persona="ana",
                 visibility=V.VISIBILITY_PRIVATE)
    shared = "Mel: the relay restarts at midnight."
    turn(shared, task_id="T-3", session_id="S-3", persona="mel")
    turn(shared, task_id="T-4", session_id="S-4", persona="ana", visibility=V.VISIBILITY_PRIVATE)
    turn("The relay has no owner on record.", task_id="T-5")
    kept = turn("Jo: the relay firmware is 2.1.", task_id="T-6", session_id="S-6", persona="jo")
    moved = turn(  # merged into `kept`: its source is copied there, and it keeps its own
        "Jo: relay firmware version is 2.1.", task_id="T-7", session_id="S-7", persona="jo")
    dropped = turn("Kim: the relay log rotates weekly.", task_id="T-8", session_id="S-8", persona="kim")
    corrected = turn("Lee: the relay fan is loud.", task_id="T-9", session_id="S-10", persona="lee")
    with conn.transaction():
        curation.merge(conn, {"id": moved.unit_id, "project": "acme", "revision": 1},
                       {"id": kept.unit_id, "revision": 1})
        conn.execute("DELETE FROM memory_sources WHERE unit_id = %s", (dropped.unit_id,))
        conn.execute("UPDATE memory_sources SET session_id = 'S-11' WHERE unit_id = %s", (corrected.unit_id,))
        conn.execute("UPDATE memory_units SET private_to = private_to || '{mel}' WHERE id = %s", (spare.unit_id,))
    flags = dict(conn.execute(f"SELECT number, {READS_ITS_SOURCES} FROM memory_units WHERE project = 'acme'"))
    assert [flags[n] for n in sorted(flags)] == [False, False, True, False, True, False, True, True], flags
    readers = [authz.Actor.reader("acme", persona) for persona in (None, "ana", "mel")]
    for actor in [*readers, authz.Actor.for_project("acme", "ops", forget=True)]:  # an operator sees every unit
        params = request_params("acme", tsquery_terms("relay"), 10, datetime.now(UTC), False, reader=actor.name)
        with authz.scoped(conn, actor):
            found = candidates(conn, params, T1, None, True)
            want = {unit: (personas, session, sessions) for unit, personas, session, sessions
                    in conn.execute(SOURCES_AS_THE_READER_SEES_THEM, {"reader": actor.name})}
        assert found.details and len(found.details) == len(found.sparse)
        assert (str(spare.unit_id) in found.details) == (actor.name in ("ana", "mel"))  # shared: mel sees the unit
        for unit, details in found.details.items():
            personas, session, sessions = want.get(unit, (None, None, None))
            assert (details["session_id"], set(details["personas"] or ()), set(details["sessions"] or ())) == (
                session, set(personas or ()), set(sessions or ())), (actor.name, unit, details)


SCORED_COLUMNS_OF_THE_UNITS = """
SELECT u.id::text, u.number, u.importance, u.trust, u.valid_from, u.type = 'episodic'
FROM memory_units u WHERE u.project = 'acme'"""


@pytest.mark.parametrize("hnsw", [False, True], ids=["exact", "hnsw"])
def test_every_candidates_details_are_its_own_units_whichever_leg_found_it(mem, conn, embedder, monkeypatch, hnsw):
    """Whichever leg found a candidate (the dense leg alone, the sparse leg alone, both, or only the neighbour walk),
    its details are its own unit's number, importance, trust and validity, on the exact path (the pool's units one
    range of the project's key) and on the HNSW path (one probe per candidate)."""
    monkeypatch.setattr(V, "RECALL_CANDIDATES", 1)  # one row per leg: the rest of the pool comes from the neighbours
    monkeypatch.setattr(V, "HNSW_CANDIDATES", 1)
    monkeypatch.setattr(V, "HNSW_MIN_PROJECT_UNITS", 0 if hnsw else 10_000)
    day = datetime.now(UTC) - timedelta(days=3)
    turns = ["Lead: the coffee machine on floor two is broken again.",
             "Lead: the tape library in the basement holds last year's archive.",
             "Lead: lunch moves to noon on Thursdays.",
             "Lead: the backup of the billing replica failed twice this week.",
             "Lead: parking passes are renewed in January.",
             "Lead: the printer queue was cleared."]
    for i, text in enumerate(turns):
        mem.remember(project="acme", kind="note", type="episodic", title=text, body=text, valid_from=day,
                     session_id="S-1", persona="lead", importance=0.1 + 0.1 * i, confidence=0.9)
    embed_all(conn, embedder)
    embeddings.ensure_model_index(conn, embeddings.model_spec(T1))
    query = "which archive"  # the sparse leg's one match; the dense leg's is the coffee machine
    vector = memory_assets.api.encode_query(T1, "the espresso maker is out of order")
    params = request_params("acme", tsquery_terms(query), 1, datetime.now(UTC), False, reader="api")
    with authz.scoped(conn, authz.Actor.reader("acme")):
        found = candidates(conn, params, T1, vector, True)
        units = {row[0]: row[1:] for row in conn.execute(SCORED_COLUMNS_OF_THE_UNITS, binary=True)}
    dense, sparse = {row[0] for row in found.dense}, {row[0] for row in found.sparse}
    near_only = {row[1] for row in found.near} - dense - sparse
    assert len(dense) == len(sparse) == 1 and dense != sparse and near_only, (found.dense, found.sparse, found.near)
    assert set(found.details) == dense | sparse | near_only
    for unit, details in found.details.items():
        assert (details["number"], details["importance"], details["trust"], details["valid_from"]) == units[unit][:4]
    assert all(row[2] == units[row[0]][4] for row in [*found.dense, *found.sparse])


def probes_of_the_pool(conn, project: str) -> str:
    """The line of EXPLAIN ANALYZE for the candidates statement's probe of each candidate's unit by its id."""
    params = statement_params(request_params(project, tsquery_terms("deploys"), 10, datetime.now(UTC), False,
                                             reader="api"), None, True)
    statement = "EXPLAIN (ANALYZE) " + embeddings.model_query("recall/candidates", T1)
    with authz.scoped(conn, authz.Actor.reader(project)):
        lines = [row[0] for row in database.execute_positional(conn, statement, params)]
    probe = re.compile(r"Index Cond: \(id = p(_\d+)?\.unit_id\)")  # the pool's alias, numbered where it is inlined
    return next(lines[i - 1] for i, line in enumerate(lines) if probe.search(line))


def test_the_pools_units_are_one_range_of_the_projects_key_on_the_exact_path_and_probed_on_the_hnsw_path(
        mem, conn, monkeypatch):
    """Under HNSW_MIN_PROJECT_UNITS the project is small and the statement reads its candidates' units as one range of
    the project's key (LoCoMo: the statement 0.91x against a probe per candidate or a scan of the table); above, each
    candidate is one probe by its id, whatever the plan guesses of the project's size (row-level security's scopes
    make it guess small: a plan read all of a 6,000-unit project's units by its key to join ~300 candidates)."""
    for i in range(12):
        note(mem, "acme", f"Deploy window {i}", f"Deploys to production happen on Tuesday slot {i}.")
    assert "never executed" in probes_of_the_pool(conn, "acme")
    monkeypatch.setattr(V, "HNSW_MIN_PROJECT_UNITS", 10)
    probes = probes_of_the_pool(conn, "acme")
    assert "never executed" not in probes and "loops=12" in probes, probes



def full_text_store(mem) -> None:
    """Kettle facts of two projects, public and private to ana (one shared with bo too) for the full-text match's
    readers."""
    for project in ("acme", "other"):
        note(mem, project, "Kettle", f"The kettle of {project} is descaled monthly.")
        note(mem, project, "Kettle log", f"Ana's kettle notes for {project}.", visibility=V.VISIBILITY_PRIVATE,
             persona="ana")
    shared = dict(title="Kettle rota", body="The kettle rota lists ana and bo.", visibility=V.VISIBILITY_PRIVATE)
    note(mem, "acme", **shared, persona="ana", task_id="T-ana")
    note(mem, "acme", **shared, persona="bo", task_id="T-bo")  # the same fact: private to both
    note(mem, "acme", "Kettle receipt", "The old kettle's receipt.")
    # the parser reads '1e90ff' as the phrase '1e90' <-> 'ff': a word's count is of the units holding the phrase
    note(mem, "acme", "Dashboard colour", "The dashboard is 1e90ff.")
    for i in range(3):
        note(mem, "acme", f"Quota {i}", f"Quota {i} is 1e90 bytes, ff flag set.")


FULL_TEXT_READERS = {
    "no persona": authz.Actor.reader("acme"),
    "the private units' persona": authz.Actor.reader("acme", "ana"),
    "the shared unit's other persona": authz.Actor.reader("acme", "bo"),
    "another persona": authz.Actor.reader("acme", "cy"),
    "an operator": authz.Actor(name="ops", read=("acme",), write=("acme",), forget=("acme",)),
    "another project's reader": authz.Actor.reader("other", "ana"),
    "no read scope": authz.Actor(name="ana", write=("acme",)),
}


def text_matches(conn, project: str, words: list[str] | None) -> int:
    """How many units memory_text_matches gives the transaction's reader."""
    return conn.execute("SELECT count(*) FROM memory_text_matches(%s, %s::text[])", (project, words)).fetchone()[0]


def text_counts(conn, project: str, words: list[str] | None) -> dict[str, int]:
    """Each word's units memory_text_counts gives the transaction's reader."""
    return dict(conn.execute("SELECT * FROM memory_text_counts(%s, %s::text[])", (project, words)).fetchall())


def entries_scans(conn) -> int:
    """The transaction's scans of the owner's full-text index so far (it may be nested: take differences)."""
    return conn.execute("SELECT pg_stat_get_xact_numscans('memory_units_entries'::regclass)").fetchone()[0]


def units_fetched(conn) -> int:
    """The transaction's heap fetches of memory_units by index scans so far."""
    return conn.execute("SELECT pg_stat_get_xact_tuples_fetched('memory_units'::regclass)").fetchone()[0]


def test_the_full_text_match_returns_row_for_row_what_the_read_policy_shows_each_reader(mem, conn):
    """memory_text_matches (sql/027) runs as the owner so that the GIN index serves a reader's full-text leg, and so
    applies memory_app's read_scope policy itself: for every kind of reader, project and query it returns exactly
    the units the policy shows that reader among those the query matches (another project's, another persona's
    private units and a reader without the read scope see nothing of them), and memory_text_counts (sql/031) counts
    exactly those of each word."""
    full_text_store(mem)
    seen = {}
    for label, actor in FULL_TEXT_READERS.items():
        for project in ("acme", "other"):
            for words in (["kettle"], ["kettle", "ana"], ["rota", "receipt", "zzzz"], ["zzzz"], ["1e90ff", "ff"]):
                with authz.scoped(conn, actor):
                    by_function = {row[0] for row in conn.execute(
                        "SELECT id FROM memory_text_matches(%s, %s)", (project, words))}
                    by_policy = {row[0] for row in conn.execute(
                        "SELECT id FROM memory_units WHERE project = %s"
                        " AND tsv @@ to_tsquery('english', array_to_string(%s::text[], ' | '))", (project, words))}
                    counted = text_counts(conn, project, words)
                    for word in words:  # each word's count in the index: the policy's units that hold it
                        assert counted.get(word, 0) == conn.execute(
                            "SELECT count(*) FROM memory_units WHERE project = %s"
                            " AND tsv @@ to_tsquery('english', %s)", (project, word)).fetchone()[0], (label, word)
                assert by_function == by_policy, (label, project, words)
                seen[label, project, words[0]] = len(by_policy)
    kettles = {label: seen[label, "acme", "kettle"] for label in FULL_TEXT_READERS}
    assert kettles == {"no persona": 2, "the private units' persona": 4, "the shared unit's other persona": 3,
                       "another persona": 2, "an operator": 4, "another project's reader": 0, "no read scope": 0}


@pytest.mark.parametrize("words", [["kettle&ana"], ["Kettle"], [""], ["kettle:*"], ["!kettle"], ["kettle", None],
                                   ["x"] * (V.TEXT_MATCH_MAX_WORDS + 1), None])
def test_the_full_text_match_takes_only_plain_words(mem, conn, words):
    """The function builds its query itself from at most TEXT_MATCH_MAX_WORDS plain words OR-ed, so no caller can
    hand it a query deep enough to fail on the rows that hold a word and not on the others (the stack-depth probe that
    kept ts_match_vq from being marked leakproof); anything else is refused before a row is read."""
    # a feedback round's terms fit, and a second round's seeds
    assert max(V.RECALL_MAX_QUERY_TERMS + V.PRF_TERMS, V.SECOND_ROUND_TERMS) <= V.TEXT_MATCH_MAX_WORDS
    note(mem, "acme", "Kettle", "The kettle is descaled monthly.")
    with authz.scoped(conn, authz.Actor.reader("acme")):
        assert text_matches(conn, "acme", ["kettle"] * V.TEXT_MATCH_MAX_WORDS) == 1
    for match in (text_matches, text_counts):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match=f"at most {V.TEXT_MATCH_MAX_WORDS}"), \
                authz.scoped(conn, authz.Actor.reader("acme")):
            match(conn, "acme", words)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=f"at most {V.TEXT_MATCH_MAX_WORDS}"), \
            authz.scoped(conn, authz.Actor.reader("acme")):  # the words that find the units, checked alike
        conn.execute("SELECT count(*) FROM memory_text_matches('acme', ARRAY['kettle'], %s::text[])", (words,))


def test_only_the_applications_role_may_run_the_full_text_match(mem, conn):
    """The function reads as the owner: it is granted to memory_app alone, whose policy it applies (the analysts'
    role, which never reads text, and any other role are refused)."""
    note(mem, "acme", "Kettle", "The kettle is descaled monthly.")
    conn.execute("CREATE ROLE memory_test_stranger NOLOGIN")
    try:
        for role in (V.READER_ROLE, "memory_test_stranger"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                conn.execute(f"SET LOCAL ROLE {role}")
                conn.execute("SELECT set_config('memory.read', 'acme', true)")
                text_matches(conn, "acme", ["kettle"])
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                conn.execute(f"SET LOCAL ROLE {role}")
                conn.execute("SELECT set_config('memory.read', 'acme', true)")
                text_counts(conn, "acme", ["kettle"])
    finally:
        conn.execute("DROP ROLE memory_test_stranger")


def test_the_full_text_leg_reads_the_gin_index_from_its_threshold_with_the_same_hits(mem, conn, monkeypatch):
    """From TEXT_INDEX_MIN_PROJECT_UNITS units a reader's full-text leg finds its matches in the GIN index (a one-term
    request at 100,000 units: 24.1 -> 1.8 ms); below, row-level security keeps the plan off the index and the leg
    reads the project's units by its key. Either way each reader gets the same hits and scores."""
    full_text_store(mem)
    mem.remember_many(service_facts(1000))
    database.refresh_statistics(conn, V.UNITS_TABLE)
    hits = {}
    for indexed in (True, False):
        monkeypatch.setattr(V, "TEXT_INDEX_MIN_PROJECT_UNITS", 0 if indexed else 10**9)
        for label, actor in FULL_TEXT_READERS.items():
            for query in ("kettle rota", "service 512 proxy", "which kettle does ana descale",
                          "kettle dashboard 1e90ff"):
                project = actor.read[0] if actor.read else "acme"
                params = request_params(project, tsquery_terms(query), 10, datetime.now(UTC), False,
                                        reader=actor.name)
                with authz.scoped(conn, actor):
                    conn.execute("SET LOCAL enable_seqscan = off")  # the units fit in a few pages: at scale the
                    # choice is between the project's key (every unit read and matched) and the index of the terms
                    before = entries_scans(conn)
                    found = candidates(conn, params, T1, None, True)
                    scans = entries_scans(conn) - before
                if not indexed or not actor.read:  # the policy's plan never reads the index; no scope, no read
                    assert scans == 0, (indexed, label, query, scans)
                elif query == "kettle rota" and project == "acme":  # a few of its 1,005 units (the other words are in
                    # every unit, and "other" holds two: its key is cheaper there)
                    assert scans > 0, (label, query)
                hits[indexed, label, query] = [(row[0], round(row[1], 9)) for row in found.sparse]
    for label, query in {key[1:] for key in hits}:
        assert hits[True, label, query] == hits[False, label, query], (label, query)
    assert hits[True, "the private units' persona", "kettle rota"] != hits[True, "another persona", "kettle rota"]
    assert len(hits[True, "no persona", "service 512 proxy"]) == V.RECALL_CANDIDATES  # every unit holds two words
    assert hits[True, "another project's reader", "kettle rota"]  # its own project's kettle


WORD_SHARES = {"kettle": 0.02, "rota": 0.06, "descale": 0.1, "filter": 0.12, "receipt": 0.4, "monthly": 0.8}


def frequency_store(mem) -> None:
    """600 units of acme: every one holds "service" and "proxy", each of WORD_SHARES's words its share of them (a
    word once or twice, for ts_rank's ties); one in ten private to ana, one in three a note (the rest env facts)."""
    rng = random.Random(15)
    mem.remember_many([gates.validate(
        project="acme", kind="note" if i % 3 == 0 else "env", type="semantic", title=f"Service {i}",
        body=" ".join(["Service number", str(i), "behind the proxy"] + ["service"] * rng.randrange(2)
                      + [word for word, share in WORD_SHARES.items() if rng.random() < share
                         for _ in range(rng.randrange(1, 3))]) + ".",
        persona="ana", visibility=V.VISIBILITY_PRIVATE if i % 10 == 0 else V.VISIBILITY_PROJECT)
        for i in range(600)])


def sparse_leg(conn, actor, query: str, monkeypatch, indexed: bool, kinds=None):
    """The sparse leg's (unit, score) rows and the (unit, term) pairs it read, for a reader, on the GIN index's path
    or on the project's key (below TEXT_INDEX_MIN_PROJECT_UNITS)."""
    monkeypatch.setattr(V, "TEXT_INDEX_MIN_PROJECT_UNITS", 0 if indexed else 10**9)
    params = request_params("acme", tsquery_terms(query), 10, datetime.now(UTC), False, kinds=kinds,
                            reader=actor.name)
    with authz.scoped(conn, actor):
        found = candidates(conn, params, T1, None, True)
    return [(row[0], round(row[1], 9)) for row in found.sparse], found.text_hits


def test_a_large_projects_full_text_leg_reads_only_its_rarest_terms_units_and_ranks_as_if_it_read_all(
        mem, conn, monkeypatch):
    """From TEXT_INDEX_MIN_PROJECT_UNITS units the sparse leg counts each term's units first and reads only those of
    its rarest terms when they hold the leg's candidates and each outscores every other term together (sql/031): a
    word every unit held made it read and rank the whole project (60 ms at 9,500 units). For every reader, words of
    every frequency and a filter that leaves too few of the rare units recallable (the leg then reads every term's),
    its ranks and scores are those of reading every unit that holds a word."""
    monkeypatch.setattr(V, "RECALL_CANDIDATES", 20)
    frequency_store(mem)
    queries = [" ".join(words) for n in (1, 2, 3) for words in itertools.combinations([*WORD_SHARES, "service"], n)]
    readers = {"no persona": authz.Actor.reader("acme"), "ana": authz.Actor.reader("acme", "ana"),
               "an operator": FULL_TEXT_READERS["an operator"]}
    read = {}
    for label, actor in readers.items():
        for query in queries:
            for kinds in (None, ["note"]):
                (pruned, read[label, query, kinds is None]) = sparse_leg(conn, actor, query, monkeypatch, True, kinds)
                every, _ = sparse_leg(conn, actor, query, monkeypatch, False, kinds)
                assert pruned == every, (label, query, kinds)
                assert len(pruned) == V.RECALL_CANDIDATES or "service" not in query, (label, query, kinds)
    # "service" is in the 540 units this reader sees: beside "rota" (6%) only the rota's are read (two pairs each),
    # beside "monthly" (80%) every one; and twenty recallable notes need more than the rota's: every one is read
    assert read["no persona", "rota service", True] < 150 < 540 < read["no persona", "monthly service", True]
    assert read["no persona", "rota service", False] > 540


def test_the_full_text_match_reads_its_entries_and_no_other_index_of_the_units(mem, conn):
    """A project's entries hold only its units, so the owner's match reads them alone: the planner AND-ed them with
    the project's key, reading every unit id of the project for a word two units hold (sql/028: 0.39 -> 0.28 ms at
    5,000 units)."""
    full_text_store(mem)
    mem.remember_many(service_facts(1000))
    database.refresh_statistics(conn, V.UNITS_TABLE)
    other_scans = ("SELECT sum(pg_stat_get_xact_numscans(indexrelid)) FROM pg_index"
                   " WHERE indrelid = 'memory_units'::regclass AND indexrelid <> 'memory_units_entries'::regclass")
    for words in (["kettle"], ["kettle", "rota", "zzzz"], ["service", "number", "staging"]):
        with authz.scoped(conn, authz.Actor.reader("acme")):
            conn.execute("SET LOCAL enable_seqscan = off")  # as at scale: an index, not a scan of a few pages
            before = entries_scans(conn), conn.execute(other_scans).fetchone()[0]
            assert text_matches(conn, "acme", words) > 0
            scans = entries_scans(conn) - before[0], conn.execute(other_scans).fetchone()[0] - before[1]
        assert scans == (1, 0), (words, scans)


def test_the_full_text_match_fetches_no_unit_its_reader_may_not_see_whatever_words_they_hold(mem, conn, monkeypatch):
    """The owner's match reads an index of each unit's lexemes under its project and audience, so a word's entries
    hold only units one kind of reader may see: on the plain index of tsv a word held by 30,000 units of another
    project made a reader's request 1.2 -> 6 ms (each of them fetched, then filtered out), a timing that told how
    often a word occurs where the reader may not look (an attacker's review of sql/027); another persona's private
    units were fetched likewise. Heap fetches are counted, not timed."""
    monkeypatch.setenv(V.OPERATORS_ENV, "ops")
    mem.remember_many(service_facts(1000))
    mem.remember_many([gates.validate(project="other", kind="note", type="semantic", title=f"Hidden {i}",
                                      body=f"The zqhidden plan {i} of the other team.", feed="test", task_id=f"H-{i}")
                       for i in range(300)])
    note(mem, "acme", "Kettle", "The kettle is descaled monthly.")
    for persona in ("ana", "bo"):
        note(mem, "acme", f"Diary of {persona}", f"The zqdiary of {persona}.", visibility=V.VISIBILITY_PRIVATE,
             persona=persona)
    database.refresh_statistics(conn, V.UNITS_TABLE)
    found = {}
    for label, actor in (("no persona", authz.Actor.reader("acme")), ("ana", authz.Actor.reader("acme", "ana")),
                         ("cy", authz.Actor.reader("acme", "cy")), ("operator", authz.Actor.operator("acme", "ops"))):
        with authz.scoped(conn, actor):
            conn.execute("SET LOCAL enable_seqscan = off")  # as at scale: the index, not a scan of a few pages
            for word in ("zqhidden", "kettle", "zqnowhere", "zqdiary"):
                before = units_fetched(conn)
                rows = text_matches(conn, "acme", [word])
                found[label, word] = (rows, units_fetched(conn) - before)
    for label in ("no persona", "ana", "cy", "operator"):
        assert found[label, "zqhidden"] == found[label, "zqnowhere"] == (0, 0), label
        assert found[label, "kettle"] == (1, 1), label
    assert [found[label, "zqdiary"] for label in ("no persona", "ana", "cy", "operator")] == [
        (0, 0), (1, 1), (0, 0), (2, 2)]


def test_a_private_unit_shared_later_is_found_under_its_new_audience(mem, conn):
    """The owner's index files a unit's words under its audience (sql/027): when a project-visible source joins a
    private unit, the unit's entries move with its private_to, so a reader naming no persona finds it at once."""
    mem.remember_many(service_facts(1000))  # the index, not the project's key, finds a rare word
    fact = dict(project="acme", kind="note", type="semantic", title="Kettle", body="The zqkettle is descaled monthly.")
    mem.remember(**fact, visibility=V.VISIBILITY_PRIVATE, persona="ana", task_id="T-ana")
    database.refresh_statistics(conn, V.UNITS_TABLE)
    counts = []
    for _ in range(2):
        with authz.scoped(conn, authz.Actor.reader("acme")):
            conn.execute("SET LOCAL enable_seqscan = off")
            before = entries_scans(conn)
            counts.append((text_matches(conn, "acme", ["zqkettle"]), entries_scans(conn) > before))
        mem.remember(**fact, persona="bo", task_id="T-bo")  # the same fact, shared
    assert counts == [(0, True), (1, True)]


def test_a_private_audience_holding_no_persona_is_no_reader_and_no_error(mem, conn):
    """The owner's index files a private unit's words under each persona of private_to: a NULL there (which no write
    path makes) must neither fail the write (array_to_tsvector refuses NULL lexemes) nor open the unit to anyone the
    policy would not show it to."""
    unit = note(mem, "acme", "Kettle", "The zqkettle is descaled monthly.", visibility=V.VISIBILITY_PRIVATE,
                persona="ana")
    conn.execute("UPDATE memory_units SET private_to = ARRAY['ana', NULL] WHERE id = %s", (unit.unit_id,))
    for persona, seen in ((None, 0), ("ana", 1), ("bo", 0)):
        with authz.scoped(conn, authz.Actor.reader("acme", persona)):
            assert text_matches(conn, "acme", ["zqkettle"]) == seen, persona


def test_a_feedback_round_of_a_longest_query_matches_through_the_index(mem, conn, monkeypatch):
    """Pseudo-relevance feedback adds up to PRF_TERMS words to a query's RECALL_MAX_QUERY_TERMS: the owner's GIN
    match took 32 at first, and such a request failed on every project from TEXT_INDEX_MIN_PROJECT_UNITS units (an
    attacker's review of sql/027)."""
    for i in range(6):
        note(mem, "acme", f"Kettle {i}", f"The kettle ZX-{i} is descaled monthly with citric acid batch {i}.")
    query = " ".join(f"word{i}" for i in range(V.RECALL_MAX_QUERY_TERMS - 1)) + " kettle"
    assert len(tsquery_terms(query)) == V.RECALL_MAX_QUERY_TERMS
    sent = []
    original = expansion.candidates
    monkeypatch.setattr(expansion, "candidates", lambda conn, params, *a, **kw: sent.append(len(params["terms"]))
                        or original(conn, params, *a, **kw))
    found = {}
    for text_index_min in (0, 10**9):
        monkeypatch.setattr(V, "TEXT_INDEX_MIN_PROJECT_UNITS", text_index_min)
        found[text_index_min] = [h.token for h in mem.recall("acme", query, legs="sparse", prf=True)]
    assert found[0] == found[10**9] and len(found[0]) == 6
    assert sent and min(sent) > V.RECALL_MAX_QUERY_TERMS  # the round did send more than a request's terms


CANDIDATES = "-- Every candidate of a recall"  # how recall/candidates begins, as pg_stat_activity shows it


class Frozen(datetime):
    """The clock recall reads, stopped at `at`: two requests compared score recency at the same instant."""

    at = datetime.now(UTC)

    @classmethod
    def now(cls, tz=None):
        return cls.at


class WarmEncoder:
    """The API's encoder (its cache emptied before each call), saying whether the model is loaded as told, and
    what the server was doing with the recall's connection while it encoded."""

    def __init__(self, url: str, conn, warm: bool = True, fails: Exception | None = None,
                 available: bool = True, meanwhile=None) -> None:
        self.url, self.pid, self.is_warm, self.fails = url, conn.info.backend_pid, warm, fails
        self.available, self.meanwhile, self.seen = available, meanwhile, []

    def __call__(self, model_key, query):
        with psycopg.connect(self.url, autocommit=True) as other:
            idle_since = None
            for _ in range(100):  # what the server does once it has read what was sent before the encode
                state, statement = other.execute("SELECT state, left(query, 40) FROM pg_stat_activity WHERE pid = %s",
                                                 [self.pid]).fetchone()
                if statement.startswith(CANDIDATES):
                    break
                # idle: encoding before the transaction, or the request's statements not read yet on a busy machine
                idle_since = (idle_since or time.monotonic()) if state == "idle" else None
                if idle_since is not None and time.monotonic() - idle_since > 0.5:
                    break
                time.sleep(0.02)
            self.seen.append((state, statement))
            if self.meanwhile is not None:  # another client's write while the model encodes
                self.meanwhile(other)
        if self.fails is not None:
            raise self.fails
        return memory_assets.api.encode_query(model_key, query) if self.available else None

    def at_hand(self, model_key, query):
        return memory_assets.api.encode_query.at_hand(model_key, query)

    def warm(self, model_key):
        return self.is_warm


def conversation(mem, conn, embedder):
    """Turns of two sessions, notes and a persona's private turn: both legs, neighbours and sessions in play."""
    day = datetime.now(UTC) - timedelta(days=3)
    for i in range(8):
        standup(mem, day + timedelta(minutes=i), f"Lead: the backup check {i} of the billing replica ran at {i} am.",
                f"S-{i % 2}")
    for title, body in HYBRID_FIXTURE:
        note(mem, "acme", title, body)
    mem.remember(project="acme", kind="note", type="episodic", title="Private", body="My backup key is in the safe.",
                 session_id="S-0", persona="ops", visibility="private", valid_from=day)
    embed_all(conn, embedder)
    conn.commit()


@pytest.mark.parametrize("hnsw", [False, True], ids=["exact", "hnsw"])
def test_a_query_encoded_while_the_server_runs_the_full_text_leg_gets_the_hits_of_the_one_statement(
        mem, conn, embedder, monkeypatch, hnsw):
    """An uncached query with terms, its model loaded, is encoded while the full-text leg (its neighbours and
    details) runs on the server, then the dense leg goes alone (the nearest vectors on the exact path, the dense
    statement merged on the HNSW one): every hit, score and component is what the one statement gives (a plain
    function encoder is always called before the transaction), for every reader."""
    monkeypatch.setattr(V, "HNSW_MIN_PROJECT_UNITS", 0 if hnsw else 10_000)
    monkeypatch.setattr(V, "RECALL_CANDIDATES", 4)  # each leg finds units the other does not: their details merge
    monkeypatch.setattr(V, "HNSW_CANDIDATES", 4)  # the walk, not its exact fallback, serves the HNSW path
    conversation(mem, conn, embedder)
    monkeypatch.setattr(Frozen, "at", datetime.now(UTC))
    monkeypatch.setattr("memory_assets.recall.search.datetime", Frozen)  # both requests score at one instant
    if hnsw:
        embeddings.ensure_model_index(conn, embeddings.model_spec(T1))
        conn.commit()
    overlapped, found, merges = [], [], []
    original = memory_assets.recall.search.candidates_while_encoding
    monkeypatch.setattr("memory_assets.recall.search.candidates_while_encoding",
                        lambda *args, **kwargs: overlapped.append(args) or original(*args, **kwargs))
    monkeypatch.setattr("memory_assets.recall.legs.merged", lambda *found: merges.append(found) or merged(*found))
    plain = memory_assets.Memory(mem.pool, mem.url, encoder=lambda m, q: memory_assets.api.encode_query(m, q))
    memory_assets.api.encode_query(T1, "warm the model")
    for actor in (authz.Actor.reader("acme"), authz.Actor.reader("acme", persona="ops")):
        for query in ("when did the backup check of the billing replica run", "how often is ZX-81 descaled",
                      "backup key"):
            memory_assets.api.encode_query.clear()
            before = len(overlapped)
            together = mem.recall("acme", query, k=4, actor=actor)
            assert len(overlapped) == before + 1
            assert len(merges) == (len(overlapped) if hnsw else 0)  # the HNSW path's dense statement, walked; the
            # exact one's nearest vectors alone (the project within RECALL_ALL_DETAILS_MAX_UNITS)
            alone = plain.recall("acme", query, k=4, actor=actor)
            assert len(overlapped) == before + 1
            assert [(h.token, h.score, h.components) for h in together] == [
                (h.token, h.score, h.components) for h in alone]
            assert together.mode == alone.mode == "hybrid" and together.notes == alone.notes
            assert len(together) == 4
            found.append([(h.components["dense"] is None, h.components["sparse"] is None, "context" in h.components)
                          for h in together])
            if query == "backup key":  # only its persona sees the private turn
                assert ("Private" in [h.title for h in together]) == (actor.name == "ops")
    hits = [hit for hits in found for hit in hits]  # units of one leg each, and neighbours, among the hits
    assert {hit[:2] for hit in hits} >= {(False, True), (True, False)} and any(hit[2] for hit in hits), found


@pytest.mark.parametrize("warm", [True, False], ids=["loaded", "to-load"])
def test_a_loaded_model_encodes_beside_the_full_text_leg_and_one_to_load_before_the_transaction(
        mem, conn, clean, embedder, warm):
    """While the model encodes the question, the server already holds the request's transaction and the full-text
    leg; a model that must load first (seconds) encodes before the transaction opens, never holding one open."""
    conversation(mem, conn, embedder)
    encoder = WarmEncoder(clean, conn, warm=warm)
    memory_assets.api.encode_query.clear()
    result = recall(conn, "acme", "when did the backup check run", encoder=encoder)
    assert result.mode == "hybrid" and result.notes == []
    (state, statement), = encoder.seen
    if warm:
        assert state in ("active", "idle in transaction") and statement.startswith(CANDIDATES), (state, statement)
        prepared = conn.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
                                [CANDIDATES + "%"]).fetchone()
        assert prepared == (1,)  # both legs' statements are one prepared statement, with one plan
    else:
        assert state == "idle" and not statement.startswith(CANDIDATES), (state, statement)
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


class AnswerWatcher(WarmEncoder):
    """WarmEncoder watching the recall's own connection instead: it waits, without asking the server anything, for
    the answers of what was sent before the encode to arrive whole (libpq reads what arrived; it sends nothing)."""

    def __init__(self, url: str, conn) -> None:
        super().__init__(url, conn)
        self.conn, self.arrived = conn, None

    def __call__(self, model_key, query):
        answered(self.conn)
        self.arrived = not self.conn.pgconn.is_busy()
        return memory_assets.api.encode_query(model_key, query)


def test_the_full_text_answer_reaches_the_client_while_the_question_encodes(mem, conn, embedder):
    """The server sends the full-text statement's answer as soon as it is ready (a flush request goes with the
    statement): without it the last part waits in the server's buffer for the next request, so fetching it after the
    encode was one more round trip; the dense statement then goes alone and the full-text rows are parsed while it
    runs. Every hit is what the one statement gives."""
    conversation(mem, conn, embedder)
    watcher = AnswerWatcher(mem.url, conn)
    query = "when did the backup check of the billing replica run"
    memory_assets.api.encode_query.clear()
    overlapped = recall(conn, "acme", query, k=4, encoder=watcher)
    assert watcher.arrived is True
    assert overlapped.mode == "hybrid" and len(overlapped) == 4
    one = recall(conn, "acme", query, k=4, encoder=memory_assets.api.encode_query)  # cached: the one statement
    assert [h.token for h in one] == [h.token for h in overlapped]


def test_a_vector_at_hand_in_a_project_known_small_asks_the_full_text_statement_first(mem, conn, clean, embedder,
                                                                                      monkeypatch):
    """A vector at hand (the query cache), in a project this connection's last request found within
    RECALL_ALL_DETAILS_MAX_UNITS, is asked as the two statements without encoding (one round trip more than the one
    statement's): the full-text one detailing every unit, then the nearest vectors alone; every hit, score and
    component is what the one statement gives, which a connection that does not know the project asks. A project
    grown past the bound since is asked as the two statements merged once, then as the one statement."""
    conversation(mem, conn, embedder)
    monkeypatch.setattr(Frozen, "at", datetime.now(UTC))
    monkeypatch.setattr("memory_assets.recall.search.datetime", Frozen)  # every request scores at one instant
    asked, merges = [], []
    original = memory_assets.recall.search.candidates_while_encoding
    monkeypatch.setattr("memory_assets.recall.search.candidates_while_encoding",
                        lambda *args, **kwargs: asked.append(args) or original(*args, **kwargs))
    monkeypatch.setattr("memory_assets.recall.legs.merged", lambda *found: merges.append(found) or merged(*found))
    query = "when did the backup check of the billing replica run"
    memory_assets.api.encode_query(T1, query)  # at hand from here on

    def hits(connection):
        result = recall(connection, "acme", query, k=4, encoder=memory_assets.api.encode_query)
        assert result.mode == "hybrid" and result.notes == [] and len(result) == 4
        return [(h.token, h.score, h.components) for h in result]

    def one_statement():  # a connection that does not know the project
        with psycopg.connect(clean, **database.connection_kwargs()) as other:
            pgvector.psycopg.register_vector(other)
            before = len(asked)
            found = hits(other)
            assert len(asked) == before and database.known_units(other, "acme") is not None
            return found

    assert database.known_units(conn, "acme") is None
    found = {}
    trips = {"one": round_trips(conn, lambda: found.setdefault("one", hits(conn)))}
    assert found["one"] == one_statement() and not asked
    units = database.known_units(conn, "acme")
    assert units == units_of(conn, "acme")
    trips["two"] = round_trips(conn, lambda: found.setdefault("two", hits(conn)))
    assert found["two"] == one_statement() and len(asked) == 1 and not merges  # known small: the full-text one first
    assert trips["two"] == (trips["one"][0] + 1, trips["one"][1] + 1)  # the nearest vectors' statement sent once
    # the full-text answer is in (sent with it, the answer would be parsed only after both: psycopg's pipeline)
    monkeypatch.setattr(V, "RECALL_ALL_DETAILS_MAX_UNITS", units)
    note(mem, "acme", "Printer queue", "The printer queue was cleared on Friday.")  # one unit past the bound
    embed_all(conn, embedder)
    conn.commit()
    assert hits(conn) == one_statement() and len(asked) == 2 and len(merges) == 1  # grown since: the two merged
    assert database.known_units(conn, "acme") == units + 1
    assert hits(conn) == one_statement() and len(asked) == 2  # now known past the bound: the one statement


def test_a_cached_vector_a_dense_request_or_a_query_without_terms_asks_one_statement(mem, conn, clean, embedder):
    """Nothing to overlap: a vector at hand in a project the connection does not know, a dense-only request and a
    query of stop words alone run the one statement, the encoder called (if at all) before the transaction."""
    conversation(mem, conn, embedder)
    encoder = WarmEncoder(clean, conn)
    memory_assets.api.encode_query(T1, "backup check")
    recall(conn, "acme", "backup check", encoder=encoder)
    assert encoder.seen == []  # cached: the encoder is not called
    for query, legs in (("when did the backup check run", "dense"), ("when was it", "hybrid")):
        memory_assets.api.encode_query.clear()
        trips = round_trips(conn, lambda q=query, legs=legs: recall(conn, "acme", q, encoder=encoder, legs=legs))
        assert encoder.seen[-1][0] == "idle" and trips[1] <= 7, (query, trips)  # one candidates statement


def test_a_model_failing_beside_the_full_text_leg_serves_full_text_and_an_error_rolls_back(mem, conn, clean, embedder):
    """The model unavailable while the full-text leg ran: its candidates alone, said in the notes; an encoder that
    raises there rolls the transaction back and the connection serves the next request."""
    conversation(mem, conn, embedder)
    unavailable = WarmEncoder(clean, conn, available=False)
    memory_assets.api.encode_query.clear()
    result = recall(conn, "acme", "when did the backup check run", encoder=unavailable)
    assert unavailable.seen[0][1].startswith(CANDIDATES)
    assert result.mode == "sparse_only" and len(result) > 0
    assert result.notes == ["no query vector: the embedding model is unavailable"]
    raising = WarmEncoder(clean, conn, fails=RuntimeError("model crashed"))
    with pytest.raises(RuntimeError, match="model crashed"):
        recall(conn, "acme", "when did the backup check run", encoder=raising)
    assert raising.seen[0][1].startswith(CANDIDATES)  # it raised inside the transaction
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert conn.execute("SELECT current_user = session_user, current_setting('memory.read', true)").fetchone() == (
        True, "")
    assert recall(conn, "acme", "when did the backup check run", encoder=memory_assets.api.encode_query).mode == (
        "hybrid")


@pytest.mark.parametrize("all_details_max", [0, V.RECALL_ALL_DETAILS_MAX_UNITS])
def test_the_two_statements_merged_are_the_candidates_of_the_one(mem, conn, embedder, monkeypatch, all_details_max):
    """Each leg's seeds bring their own neighbouring turns: the full-text statement's and the dense one's together
    are the one statement's neighbours, details and legs, where the two legs' seeds differ. In a project of at most
    RECALL_ALL_DETAILS_MAX_UNITS units the full-text statement details every unit recall may return (never another
    persona's private turn, nor one the filters leave out) and the dense statement is the leg alone, whose seeds'
    neighbours come from those details; above, the dense statement details its own."""
    monkeypatch.setattr(V, "CONTEXT_SEED_RANK", 3)
    monkeypatch.setattr(V, "CONTEXT_WINDOW", 2)
    monkeypatch.setattr(V, "RECALL_CANDIDATES", 3)  # a leg's units the other statement reads nothing of
    monkeypatch.setattr(V, "EXACT_OVERFETCH", 4)  # every vector over-fetched: the filtered ones leave 3 (below, 3 of
    # the nearest 3 would be short: test_a_small_projects_dense_leg_keeps_the_vectors_the_probe_keeps)
    monkeypatch.setattr(V, "RECALL_ALL_DETAILS_MAX_UNITS", all_details_max)
    day = datetime.now(UTC) - timedelta(days=3)
    for text in ("the kettle ZX-81 needs descaling once a month", "invoice 2231 for asset ZX-81 lists a descaling fee",
                 "the printer queue was cleared", "private", "nobody wrote down how often the ZX81 gets decalcified",
                 "lunch moves to noon", "env", "the ZX81 decalcification interval is not documented",
                 "semantic", "mineral build-up in boilers goes with citric acid"):
        if text == "semantic":  # a fact, no turn: it has details, and is no one's neighbour
            mem.remember(project="acme", kind="note", type="semantic", title="The ZX-81 descaling fact.",
                         body="The ZX-81 kettle is descaled with citric acid.", valid_from=day, persona="lead")
        elif text == "private":  # a turn of S-1 the reader may not see
            mem.remember(project="acme", kind="note", type="episodic", title="Ops: the ZX-81 descaling log.",
                         body="Ops: the ZX-81 descaling log is in the private wiki.", valid_from=day,
                         session_id="S-1", persona="ops", visibility="private")
        elif text == "env":  # a turn of S-1 the request's kinds leave out
            assert mem.remember(project="acme", kind="env", type="episodic", title="Lead: the descaling schedule.",
                                body="Lead: the ZX-81 descaling schedule is pinned.", valid_from=day,
                                session_id="S-1", persona="lead").token
        else:
            standup(mem, day, f"Lead: {text}.", "S-1")
    embed_all(conn, embedder)
    query = "how frequently must the ZX-81 get descaled"
    vector = memory_assets.api.encode_query(T1, query)
    params = request_params("acme", tsquery_terms(query), 3, datetime.now(UTC), False, kinds=["note"], reader="api")
    merges = []
    monkeypatch.setattr("memory_assets.recall.legs.merged", lambda *found: merges.append(found) or merged(*found))
    unpacked = []  # the rows of each statement the two-statement path received, the full-text one's first
    with conn.pipeline(), authz.scoped(conn, authz.Actor.reader("acme")):
        one = candidates(conn, params, T1, vector, True)
        monkeypatch.setattr("memory_assets.recall.legs.unpack",
                            lambda rows, planned: unpacked.append(rows) or unpack(rows, planned))
        two, encoded = candidates_while_encoding(conn, params, T1, lambda: vector)
        text_only = candidates(conn, params, T1, None, True)  # the model unavailable: the full-text leg alone
        text_only_two, unavailable = candidates_while_encoding(conn, params, T1, lambda: None)
    assert encoded is vector and unavailable is None
    assert (text_only_two.sparse, sorted(text_only_two.near)) == (text_only.sparse, sorted(text_only.near))
    assert text_only.near and {unit: text_only_two.details[unit] for unit in text_only.details} == text_only.details
    assert len(merges) == (0 if all_details_max else 1)  # the leg alone, or the two statements merged
    seeds = [{row[0] for row in leg[: V.CONTEXT_SEED_RANK] if row[2]} for leg in (one.dense, one.sparse)]
    assert seeds[0] - seeds[1] and seeds[1] - seeds[0], seeds  # each leg brings neighbours of its own
    assert {row[0] for row in one.near} & (seeds[0] - seeds[1])  # the dense leg's own seeds have neighbours
    dense_side = {row[0] for row in one.dense} | {row[1] for row in one.near if row[0] in seeds[0]}
    assert set(one.details) - dense_side, one.details  # units only the full-text statement details
    assert (two.model_key, two.units, two.dense, two.sparse, two.text_hits) == (
        one.model_key, one.units, one.dense, one.sparse, one.text_hits)
    assert sorted(two.near) == sorted(one.near) and len(set(two.near)) == len(two.near)
    assert {unit: two.details[unit] for unit in one.details} == one.details
    numbers = {str(unit_id): number for unit_id, number in conn.execute(
        "SELECT id, number FROM memory_units WHERE project = 'acme' AND kind = 'note' AND private_to IS NULL"
        ).fetchall()}
    assert sorted(numbers.values()) == [1, 2, 3, 5, 6, 8, 9, 10]  # not the private turn (4) nor the env one (7)
    assert set(two.details) == (set(numbers) if all_details_max else set(one.details))
    pairs = {(numbers[seed], numbers[turn]) for seed, turn, _ in one.near}
    (dense_seed,) = {numbers[seed] for seed in seeds[0] - seeds[1]}
    assert dense_seed == 8 and {turn for seed, turn in pairs if seed == 8} == {6, 10}  # not 7 (env) nor 9 (a fact)
    assert not {4, 7, 9} & {number for pair in pairs for number in pair}
    context, *rows = unpacked[0]  # the full-text statement's rows, as recall received them: its context first
    assert context[CONTEXT_COLUMNS] is None and context[:CONTEXT_COLUMNS] == (
        T1, units_of(conn, "acme"), two.text_hits, two.snapshot, bool(all_details_max))
    assert all(row[:CONTEXT_COLUMNS] == (None,) * CONTEXT_COLUMNS for row in rows)  # sent once, not on every row
    ids = [row[CONTEXT_COLUMNS] for row in rows]
    assert len(ids) == len(set(ids)), ids  # one row per unit, a candidate's or any other's: none read twice
    near_sent = [row[-2] for row in rows if row[-2]]  # the neighbours the statement worked out itself
    assert not near_sent if all_details_max else near_sent  # beside every unit's details, recall works them out
    assert (set(ids) == set(numbers)) if all_details_max else (set(ids) < set(two.details))
    if all_details_max:  # units the full-text statement read outside its legs' pool: their details compared above
        full_text_side = {row[0] for row in one.sparse} | {row[1] for row in one.near if row[0] in seeds[1]}
        assert set(numbers) - full_text_side and set(numbers) - full_text_side <= set(one.details)


def units_of(conn, project):
    """The project's numbered units (memory_last_number)."""
    return conn.execute("SELECT memory_last_number(%s)", [project]).fetchone()[0]


@pytest.mark.parametrize("overfetch", [4, 1])
def test_a_small_projects_dense_leg_keeps_the_vectors_the_probe_keeps(mem, conn, embedder, monkeypatch, overfetch):
    """After the encode a small project's dense leg is its nearest vectors alone, each checked against the details of
    every unit the full-text statement read: a vector of a unit corrected since it was embedded, one whose unit's
    content hash changed, a kind the request leaves out and another persona's private unit are left out, as the one
    statement's probe of each unit leaves them out. Where those leave a full over-fetch short of the leg's candidates
    (they are the nearest here), every vector of the project is read, as the one statement's exact fallback reads
    them; a zero query vector (every distance not a number) leaves its order to the dense statement."""
    monkeypatch.setattr(V, "RECALL_CANDIDATES", 3)
    monkeypatch.setattr(V, "EXACT_OVERFETCH", overfetch)  # 12 vectors over-fetched (all of them), or the nearest 3
    corrected = note(mem, "acme", "ZX-81 descaling cadence", "The ZX-81 kettle is descaled every month.").token
    note(mem, "acme", "ZX-81 descaling interval", "The ZX-81 kettle descaling interval is monthly.")  # rehashed
    mem.remember(project="acme", kind="env", type="semantic", title="ZX-81 descaling frequency",
                 body="The ZX-81 kettle is descaled monthly.")  # a kind the request leaves out
    mem.remember(project="acme", kind="note", type="semantic", title="ZX-81 descaling log",
                 body="The ZX-81 kettle descaling happens monthly, says the log.", persona="ops", visibility="private")
    for title, body in HYBRID_FIXTURE:
        note(mem, "acme", title, body)
    embed_all(conn, embedder)
    assert mem.correct("acme", corrected, title="Lunch moves", body="Lunch moves to noon on Fridays.") == 2
    conn.execute("UPDATE memory_units SET content_hash = md5(content_hash) WHERE title = 'ZX-81 descaling interval'")
    conn.commit()
    left_out = dict(conn.execute(  # the four units whose vectors recall may not serve, with the revision they are at
        "SELECT u.id::text, u.revision FROM memory_units u JOIN memory_embeddings e ON e.unit_id = u.id"
        " WHERE u.title LIKE 'ZX-81 descaling %' OR u.title = 'Lunch moves'").fetchall())
    assert sorted(left_out.values()) == [1, 1, 1, 2]
    query = "how often is the ZX-81 kettle descaled"
    vector = memory_assets.api.encode_query(T1, query)
    nearest = [row[0] for row in conn.execute(
        "SELECT unit_id::text FROM memory_embeddings ORDER BY embedding <=> %s LIMIT 3", (vector,)).fetchall()]
    assert set(nearest) & set(left_out)  # the nearest 3 hold vectors left out
    params = request_params("acme", tsquery_terms(query), 3, datetime.now(UTC), False, kinds=["note"], reader="api")
    merges, fetched = [], []  # fetched: each nearest-vectors statement's over-fetch
    monkeypatch.setattr("memory_assets.recall.legs.merged", lambda *found: merges.append(found) or merged(*found))
    sent = memory_assets.recall.legs.execute_positional
    nearest = "FROM nearest n ORDER BY n.distance"  # recall/dense_vectors
    monkeypatch.setattr("memory_assets.recall.legs.execute_positional", lambda conn, statement, params, **how: (
        fetched.append(params["exact_overfetch"]) if nearest in statement else None) or sent(
        conn, statement, params, **how))
    zero = vector * 0
    with conn.pipeline(), authz.scoped(conn, authz.Actor.reader("acme"), one_snapshot=True):
        one = candidates(conn, params, T1, vector, True)
        two, _ = candidates_while_encoding(conn, params, T1, lambda: vector)
        assert not merges and fetched == ([12] if overfetch == 4 else [3, units_of(conn, "acme") + 1])
        one_zero = candidates(conn, params, T1, zero, True)
        two_zero, _ = candidates_while_encoding(conn, params, T1, lambda: zero)
    assert len(two.dense) == 3 and not {row[0] for row in two.dense} & set(left_out)
    assert (two.dense, two.sparse, sorted(two.near)) == (one.dense, one.sparse, sorted(one.near))
    assert len(merges) == 1 and all(math.isnan(row[1]) for row in two_zero.dense)  # the dense statement's order
    assert [row[0] for row in two_zero.dense] == [row[0] for row in one_zero.dense] and len(two_zero.dense) == 3


DECAY_SCANS = """
SELECT seq_scan + idx_scan FROM pg_stat_xact_user_tables WHERE relname = 'decay_scores'"""  # this transaction's
# scans of the table so far, whatever the plan reads it by (a rescan of a probe counts again)


@pytest.mark.parametrize("all_details_max", [0, V.RECALL_ALL_DETAILS_MAX_UNITS])
def test_a_current_recall_reads_each_units_latest_decay_score(mem, conn, embedder, monkeypatch, today,
                                                             all_details_max):
    """Each candidate's recency is its own latest decay score: in a small project read once from the project's latest
    day (a unit scored that day has no later score), by a probe of its own for a unit not scored that day, or for
    every unit in a project past RECALL_ALL_DETAILS_MAX_UNITS; another project's later day moves nothing, nor a day
    scored after a newer one, and as_of reads none."""
    monkeypatch.setattr(V, "RECALL_ALL_DETAILS_MAX_UNITS", all_details_max)
    for name in ("scored today", "scored yesterday", "never scored"):
        note(mem, "acme", f"Relay {name}", f"The relay {name} reports its port state to the gateway.")
    note(mem, "beta", "Relay of beta", "The relay of beta reports its port state to the gateway.")
    embed_all(conn, embedder)
    ids = dict(conn.execute("SELECT title, id::text FROM memory_units").fetchall())
    scores = [(today - timedelta(days=2), "Relay scored today", 0.11), (today, "Relay scored today", 0.33),
              (today - timedelta(days=1), "Relay scored yesterday", 0.22),
              (today + timedelta(days=3), "Relay of beta", 0.9),  # beta's latest day is after acme's
              (today - timedelta(days=3), "Relay scored today", 0.44)]  # an older day scored last
    for day, title, recency in scores:
        conn.execute("INSERT INTO decay_scores (day, unit_id, project, recency, activation, trust, expired, stale, "
                     "score) SELECT %s, id, project, %s, 0, 0.5, false, false, 0.5 FROM memory_units WHERE id = %s",
                     (day, recency, ids[title]))
    conn.commit()
    conn.execute("ANALYZE decay_scores")  # the plan made knowing these rows, not whatever autovacuum saw last
    query = "relay port state"
    vector = memory_assets.api.encode_query(T1, query)
    found, scans = {}, {}
    for historical in (False, True):
        params = request_params("acme", tsquery_terms(query), 10, datetime.now(UTC), historical, reader="api")
        with authz.scoped(conn, authz.Actor.reader("acme")):
            before = conn.execute(DECAY_SCANS).fetchone()[0]
            found[historical] = candidates(conn, params, T1, vector, True).details
            scans[historical] = conn.execute(DECAY_SCANS).fetchone()[0] - before
    recency = {title[len("Relay "):]: found[False][ids[title]]["recency"]
               for title in ("Relay scored today", "Relay scored yesterday", "Relay never scored")}
    assert recency == {"scored today": 0.33, "scored yesterday": 0.22, "never scored": None}
    # the project's latest day and its rows, then a probe for each unit not scored that day; past the bound a probe for
    # every unit
    assert scans[False] == (2 + 2 if all_details_max else 3)
    assert len(found[True]) == 3 and {unit["recency"] for unit in found[True].values()} == {None}
    assert scans[True] == 0
    hits = {hit.title: hit.components["recency"] for hit in mem.recall("acme", query)}
    assert hits["Relay scored today"] == 0.33 and hits["Relay scored yesterday"] == 0.22
    assert 0.99 < hits["Relay never scored"] <= 1  # from its validity start, written moments ago


def test_a_unit_the_full_text_statement_did_not_see_gets_its_details_from_the_dense_statement(mem, conn, clean,
                                                                                              embedder, monkeypatch):
    """Inside a caller's READ COMMITTED transaction each statement reads a snapshot of its own: a unit written and
    embedded while the question encodes is in the dense leg but not among the details the full-text statement gave
    of every unit, so the dense statement runs again with its details, as for a larger project."""
    conversation(mem, conn, embedder)
    query = "how often is the ZX-81 descaled"
    vector = memory_assets.api.encode_query(T1, query)
    later = datetime.now(UTC) + timedelta(minutes=1)  # the request's time: after the unit written meanwhile
    params = request_params("acme", tsquery_terms(query), 8, later, False, reader="api")

    def written_meanwhile():
        answered(conn)  # the full-text answer in first: its statement read the store before
        mem.remember(project="acme", kind="note", type="semantic", title="ZX-81 descaling cadence",
                     body="The ZX-81 is descaled every second Monday.")
        with psycopg.connect(clean, **database.connection_kwargs()) as other:
            pgvector.psycopg.register_vector(other)
            embed_all(other, embedder)
        return vector

    answers, merges = [], []
    monkeypatch.setattr("memory_assets.recall.legs.received",
                        lambda *args, **kwargs: answers.append(received(*args, **kwargs)) or answers[-1])
    monkeypatch.setattr("memory_assets.recall.legs.merged", lambda *found: merges.append(found) or merged(*found))
    with conn.pipeline(), authz.scoped(conn, authz.Actor.reader("acme")):  # READ COMMITTED: no one snapshot
        found, _ = candidates_while_encoding(conn, params, T1, written_meanwhile)
    (new_unit,) = [str(row[0]) for row in conn.execute(
        "SELECT id FROM memory_units WHERE title = 'ZX-81 descaling cadence'").fetchall()]
    assert new_unit not in answers[0].details and len(merges) == 1  # the full-text answer without it: merged
    assert new_unit in {row[0] for row in found.dense} and new_unit in found.details


def test_a_unit_both_statements_detail_is_as_the_later_one_read_it(mem, conn, clean, embedder, monkeypatch):
    """Inside a caller's READ COMMITTED transaction, a unit changed while the question encodes: the two statements'
    details merged (legs.merged) give it as the dense statement read it, after the change, as the one statement
    sent then would (a first columnar merge kept the full-text statement's, a review found)."""
    conversation(mem, conn, embedder)
    query = "backup check billing replica"
    vector = memory_assets.api.encode_query(T1, query)
    params = request_params("acme", tsquery_terms(query), 8, datetime.now(UTC) + timedelta(minutes=1), False,
                            reader="api")

    def changed_meanwhile():
        answered(conn)  # the full-text answer in first: its statement read the store before
        with psycopg.connect(clean, **database.connection_kwargs()) as other:
            other.execute("UPDATE memory_units SET importance = 0.987 WHERE project = 'acme'")
        return vector

    merges = []
    monkeypatch.setattr("memory_assets.recall.legs.merged", lambda *found: merges.append(found) or merged(*found))
    with conn.pipeline(), authz.scoped(conn, authz.Actor.reader("acme")):  # READ COMMITTED: no one snapshot
        found, _ = candidates_while_encoding(conn, params, T1, changed_meanwhile)
    (full_text, dense_side), = merges  # two snapshots: the dense statement ran with its details, then merged
    assert not any(unit["importance"] == pytest.approx(0.987) for unit in full_text.details.values())
    dense = {row[0] for row in found.dense}
    assert dense and dense <= set(full_text.details) & set(dense_side.details)
    assert all(found.details[u]["importance"] == pytest.approx(0.987) for u in dense)


def test_a_serving_model_switched_between_the_two_statements_is_seen_by_the_dense_one(mem, conn, embedder):
    """Inside a caller's READ COMMITTED transaction, a serving model switched after the full-text statement read it:
    the dense leg alone says which model serves now (and has no rows), so recall notes the switch instead of a
    model without vectors."""
    conversation(mem, conn, embedder)
    query = "how often is the ZX-81 descaled"
    vector = memory_assets.api.encode_query(T1, query)
    params = request_params("acme", tsquery_terms(query), 8, datetime.now(UTC), False, reader="api")

    def switched_meanwhile():
        answered(conn)
        mem.set_serving_model(T2)
        return vector

    with conn.pipeline(), authz.scoped(conn, authz.Actor.reader("acme")):  # READ COMMITTED: no one snapshot
        found, _ = candidates_while_encoding(conn, params, T1, switched_meanwhile)
    assert (found.model_key, found.dense) == (T2, []) and found.sparse


def answered(conn, seconds: float = 5) -> None:
    """Wait until the server has answered every statement the connection sent (a pipelined request's first answer
    in before another connection writes)."""
    deadline = time.monotonic() + seconds
    while conn.pgconn.is_busy() and time.monotonic() < deadline:
        conn.pgconn.consume_input()
        time.sleep(0.01)


def test_a_unit_forgotten_while_the_question_encodes_is_read_as_of_the_requests_one_snapshot(mem, conn, clean,
                                                                                           embedder):
    """Both legs' statements and the cited text read one snapshot: a forget committed while the model encodes (after
    the full-text statement ran) changes nothing of the request, where three snapshots made the forgotten unit a
    hit with a blank text, scored by one leg as it was and the other as it is."""
    conversation(mem, conn, embedder)
    query = "how often is ZX-81 descaled"
    memory_assets.api.encode_query.clear()
    before = [(h.token, h.title, h.status, h.score) for h in mem.recall("acme", query, k=8)]
    target = before[0][0]

    def forget(other):
        lifecycle.forget(other, "acme", target, authz.Actor.for_project("acme", forget=True), reason="asked")

    encoder = WarmEncoder(clean, conn, meanwhile=forget)
    memory_assets.api.encode_query.clear()
    during = recall(conn, "acme", query, k=8, encoder=encoder)
    assert encoder.seen[0][1].startswith(CANDIDATES)  # the forget came after the full-text statement
    assert [(h.token, h.title, h.status) for h in during] == [(t, title, status) for t, title, status, _ in before]
    after = mem.recall("acme", query, k=8)
    assert target not in [h.token for h in after] and all(h.title for h in after)


def test_the_query_vector_cache_keeps_its_bound_and_the_latest_used():
    """At its size the cache drops the vector used longest ago; a hit counts as a use; a normalised form of a
    cached question is the same entry."""
    vectors = memory_assets.api.QueryVectors(size=2)
    for question in ("deploy window", "relay port", "deploy window", "backup key"):
        vectors(T1, question)
    assert vectors.at_hand(T1, "relay port") is None  # used longest ago: dropped
    assert vectors.at_hand(T1, "deploy window") is not None and vectors.at_hand(T1, "backup key") is not None
    assert vectors.at_hand(T1, "  Deploy   window ") is vectors.at_hand(T1, "deploy window")
    assert len(vectors._vectors) == 2


def test_the_exact_path_sorts_the_vectors_alone_and_joins_them_all_when_its_over_fetch_falls_short(mem, conn,
                                                                                                    embedder,
                                                                                                    monkeypatch):
    """Under HNSW_MIN_PROJECT_UNITS the dense leg sorts the project's vectors by distance alone and probes the
    nearest EXACT_OVERFETCH x candidates for their units; when the filters leave too few of them while more vectors
    remain (superseded units nearest the query), the join of every vector with its unit serves: either way the
    leg is the exact top of the units the request may see."""
    for i in range(6):
        old = note(mem, "acme", f"Deploy window {i}", f"Deploys to production happen on Tuesday slot {i}.")
        new = note(mem, "acme", f"Cafeteria {i}", f"Cafeteria menu item {i} is served on Fridays.")
        lifecycle.supersede(conn, new.unit_id, old.unit_id)
    for i in range(4):
        note(mem, "acme", f"Release train {i}", f"Production releases leave the station every week, train {i}.")
    embed_all(conn, embedder)
    monkeypatch.setattr(V, "RECALL_CANDIDATES", 3)
    query = "when do deploys to production happen"
    legs_of = {}
    for overfetch in (1.0, 100.0):  # the six superseded units fill the first scan; the second holds every vector
        monkeypatch.setattr(V, "EXACT_OVERFETCH", overfetch)
        legs_of[overfetch] = [h.title for h in mem.recall("acme", query, k=3, legs="dense")]
    assert legs_of[1.0] == legs_of[100.0] and len(legs_of[1.0]) == 3, legs_of
    assert all(title.startswith("Release train") for title in legs_of[1.0]), legs_of


def test_the_exact_paths_sort_keeps_a_tie_at_its_edge_whole(mem, conn, embedder, monkeypatch):
    """One text under several kinds is one vector: a tie at the over-fetch's edge is kept whole, so the leg orders
    it by unit number as the join of every vector did (cut by id, another unit came first), on the one statement's
    path and on a small project's nearest vectors alone (cut there, the units read first would come first)."""
    for kind in ("note", "recipe", "env", "qa", "codemap"):
        mem.remember(project="acme", kind=kind, type="semantic", title="Deploy window",
                     body="Deploys to production happen on Tuesdays after the review.")
    embed_all(conn, embedder)
    monkeypatch.setattr(V, "RECALL_CANDIDATES", 3)
    tokens = {}
    for overfetch in (1.25, 100.0):  # three of five tied vectors, then all of them
        monkeypatch.setattr(V, "EXACT_OVERFETCH", overfetch)
        tokens[overfetch] = [h.token for h in mem.recall("acme", "when are deploys", k=3, legs="dense")]
    assert tokens[1.25] == tokens[100.0] == ["mem-1", "mem-2", "mem-3"], tokens
    monkeypatch.setattr(V, "EXACT_OVERFETCH", 1.25)  # and a small project's nearest vectors alone, after the encode,
    conn.execute("UPDATE memory_embeddings SET model_revision = model_revision WHERE unit_id IN ("  # units 1 and 2's
                 "SELECT id FROM memory_units WHERE number <= 2)")  # vectors read last: a cut keeps 3, 4 and 5
    conn.commit()
    query = "when are deploys"
    vector = memory_assets.api.encode_query(T1, query)
    params = request_params("acme", tsquery_terms(query), 3, datetime.now(UTC), False, reader="api")
    with conn.pipeline(), authz.scoped(conn, authz.Actor.reader("acme"), one_snapshot=True):
        two, _ = candidates_while_encoding(conn, params, T1, lambda: vector)
    numbers = dict(conn.execute("SELECT id::text, number FROM memory_units").fetchall())
    assert [numbers[row[0]] for row in two.dense] == [1, 2, 3]
