"""Curation on the real model: paraphrases merge, contradictions go to review, proposals are promoted."""

import threading
from datetime import date, timedelta
from typing import Any

import pytest
from psycopg.rows import dict_row

from memory_assets import authz, consolidation, curation, embeddings, quality
from memory_assets import vocabulary as V
from memory_assets.database import query
from tests.cases import SERVING_MODEL as T1
from tests.cases import embed_all, flights, until_waiting_on_a_lock

PARAPHRASES = [
    (("Staging database requires TLS", "The staging PostgreSQL only accepts connections with sslmode=require."),
     ("Staging DB needs TLS", "The staging Postgres database only accepts sslmode=require connections.")),
    (("Staging requires TLS", "Staging PostgreSQL requires sslmode=require."),
     ("Staging requires TLS.", "Staging PostgreSQL requires sslmode=require")),
]


@pytest.fixture(params=["exact", "hnsw"])
def nearest_path(request, monkeypatch):
    """Curation's two ways to the nearest older unit: the exact scan, and the HNSW index walk of a large project."""
    if request.param == "hnsw":
        monkeypatch.setattr(V, "HNSW_MIN_PROJECT_UNITS", 0)
        monkeypatch.setattr(V, "HNSW_WALK_MIN_SHARE", 0.0)
    return request.param


@pytest.mark.parametrize("old,new", PARAPHRASES)
def test_paraphrases_merge_into_the_older_unit(mem, conn, embedder, old, new, today, nearest_path):
    first = mem.remember(project="acme", kind="env", type="semantic", title=old[0], body=old[1], task_id="T-1")
    second = mem.remember(project="acme", kind="env", type="semantic", title=new[0], body=new[1], task_id="T-2")
    embed_all(conn, embedder)
    assert curation.curate_day(conn, T1, today)["merged"] == 1
    canonical, newcomer = mem.unit("acme", first.token), mem.unit("acme", second.token)
    assert newcomer["status"] == "retired" and newcomer["duplicate_of"] == canonical["id"]
    assert canonical["status"] == "active" and canonical["importance"] == pytest.approx(0.5 + V.MERGE_IMPORTANCE_BUMP)
    assert [s["task_id"] for s in canonical["sources"]] == ["T-1", "T-2"]
    live = conn.execute("SELECT count(*) FROM memory_units "
                        "WHERE status IN ('proposed','review','active')").fetchone()[0]
    assert live == 1
    assert curation.curate_day(conn, T1, today) == {"merged": 0, "review": 0, "promoted": 0, "unchanged": 0}


def test_a_private_unit_never_takes_in_a_shared_paraphrase(mem, conn, embedder, today, nearest_path):
    """Merging a shared newcomer into a private unit would show the private wording to every reader."""
    (old_title, old_body), (new_title, new_body) = PARAPHRASES[0]
    private = mem.remember(project="acme", kind="env", type="semantic", title=old_title, body=old_body,
                           task_id="T-1", persona="ana", visibility="private")
    shared = mem.remember(project="acme", kind="env", type="semantic", title=new_title, body=new_body, task_id="T-2")
    embed_all(conn, embedder)
    assert curation.curate_day(conn, T1, today)["merged"] == 0
    ana = authz.Actor.reader("acme", "ana")
    assert [s["task_id"] for s in mem.unit("acme", private.token, ana)["sources"]] == ["T-1"]
    assert mem.unit("acme", shared.token)["status"] == "active"


@pytest.mark.parametrize("verdict", ["merge", "review"])
def test_a_unit_corrected_while_its_day_is_curated_keeps_its_new_words_and_is_curated_next(
        mem, conn, embedder, today, monkeypatch, verdict):
    """Regression (an attacker's pass): curation reads the day's units first, then judges each; one corrected in
    between was merged away (retired, its sources moved) or sent to review for words it no longer holds, and marked
    curated at its new revision, so the new words were never judged."""
    (old_title, old_body), (new_title, new_body) = PARAPHRASES[1]
    mem.remember(project="acme", kind="env", type="semantic", title=old_title, body=old_body, task_id="T-1")
    if verdict == "review":
        new_title, new_body = "Staging TLS rule removed", "Staging PostgreSQL no longer requires sslmode=require."
    newcomer = mem.remember(project="acme", kind="env", type="semantic", title=new_title, body=new_body,
                            task_id="T-2")
    embed_all(conn, embedder)
    real_nearest = curation.nearest_older
    fixed = "Production PostgreSQL requires client certificates (mTLS) for every service account."

    def nearest_then_corrected(cur, unit, model_key):
        found = real_nearest(cur, unit, model_key)
        if str(unit["id"]) == newcomer.unit_id:
            mem.correct("acme", newcomer.token, title="Production requires mTLS", body=fixed)
        return found

    monkeypatch.setattr(curation, "nearest_older", nearest_then_corrected)
    counts = curation.curate_day(conn, T1, today)
    assert (counts["merged"], counts["review"]) == (0, 0)
    unit = mem.unit("acme", newcomer.token)
    assert (unit["status"], unit["body"], [s["task_id"] for s in unit["sources"]]) == ("active", fixed, ["T-2"])
    monkeypatch.setattr(curation, "nearest_older", real_nearest)
    embed_all(conn, embedder)
    assert curation.curate_day(conn, T1, today)["unchanged"] == 1  # its new words judged: a different fact


def test_the_vpn_contradiction_goes_to_review_never_merges(mem, conn, embedder, today, nearest_path):
    deferred = mem.remember(project="acme", kind="note", type="semantic", title="VPN rollout deferred to Q3",
                            body="The VPN rollout was deferred to Q3 after the security review.")
    cancelled = mem.remember(project="acme", kind="note", type="semantic", title="VPN rollout cancelled",
                             body="The VPN rollout was cancelled after the security review.")
    embed_all(conn, embedder)
    counts = curation.curate_day(conn, T1, today)
    assert counts["merged"] == 0 and counts["review"] == 1
    unit = mem.unit("acme", cancelled.token)
    assert unit["status"] == "review" and str(unit["conflicts_with"]) == deferred.unit_id
    assert [r["token"] for r in mem.review_queue("acme")] == [cancelled.token]


def test_unrelated_units_and_episodes_are_left_alone(mem, conn, embedder, today, nearest_path):
    mem.remember(project="acme", kind="note", type="episodic", title="VPN rollout deferred to Q3",
                 body="The VPN rollout was deferred to Q3 after the security review.")
    mem.remember(project="acme", kind="note", type="episodic", title="VPN rollout cancelled",
                 body="The VPN rollout was cancelled after the security review.")
    mem.remember(project="acme", kind="note", type="semantic", title="Release train on Thursdays",
                 body="Releases are cut on Thursday mornings UTC.")
    embed_all(conn, embedder)
    assert curation.curate_day(conn, T1, today)["review"] == 0


def test_a_weekly_summary_is_neither_merged_into_nor_reviewed_against_its_own_members(mem, conn, embedder, today,
                                                                                      nearest_path):
    """A summary is newer than the members it was built from and close to its central one; curating its day once
    sent it to review against that member (a closer one would have merged it away)."""
    flights(mem)
    embed_all(conn, embedder)
    curation.curate_day(conn, T1, today)
    assert consolidation.consolidate_week(conn, T1, today - timedelta(days=today.weekday()))["clusters"] == 1
    embed_all(conn, embedder)
    assert curation.curate_day(conn, T1, today) == {"merged": 0, "review": 0, "promoted": 0, "unchanged": 1}
    assert conn.execute("SELECT status, conflicts_with, duplicate_of FROM memory_units "
                        "WHERE created_by = %s", (V.FEED_CONSOLIDATION,)).fetchall() == [("active", None, None)]


def test_a_large_project_walks_the_hnsw_index_to_the_nearest_older_unit(mem, conn, embedder, today):
    """Above HNSW_MIN_PROJECT_UNITS the nearest older unit comes from the model's partial HNSW index (an exact scan
    cost each newcomer time in proportion to the project): the statement must be one that index serves, and find
    what the exact scan finds, skipping newer, private and other-kind units on the way."""
    (old_title, old_body), (new_title, new_body) = PARAPHRASES[0]
    older = mem.remember(project="acme", kind="env", type="semantic", title=old_title, body=old_body, task_id="T-1")
    mem.remember(project="acme", kind="note", type="semantic", title=old_title, body=old_body + " ", task_id="T-2")
    mem.remember(project="acme", kind="env", type="semantic", title=new_title, body=new_body + " Private.",
                 task_id="T-3", persona="ana", visibility="private")
    newer = mem.remember(project="acme", kind="env", type="semantic", title=new_title, body=new_body, task_id="T-4")
    mem.remember(project="acme", kind="env", type="semantic", title=new_title, body=new_body + " Again.", task_id="T-5")
    embed_all(conn, embedder)
    embeddings.ensure_model_index(conn, embedder.spec)
    hnsw = embeddings.model_query("curation/nearest_older_hnsw", T1)
    with conn.cursor(row_factory=dict_row) as cur:
        unit = next(u for u in cur.execute(query("curation/day_units"), curation.day_units_params(T1, today))
                    if str(u["id"]) == newer.unit_id)
        params = curation.nearest_params(unit, T1)
        exact = cur.execute(query("curation/nearest_older"), params).fetchone()
        with conn.transaction():  # the knobs alone hold the plan on the graph, even on a store never analysed
            cur.execute(query("curation/hnsw_scan"), {"ef_search": V.HNSW_EF_SEARCH})
            plan = [row["QUERY PLAN"] for row in cur.execute("EXPLAIN (ANALYZE) " + hnsw, params)]
            found = cur.execute(hnsw, params).fetchone()
        with conn.transaction():
            assert curation.nearest_older(cur, {**unit, "large": True}, T1)["id"] == found["id"]
            assert cur.execute("SELECT current_setting('enable_sort') AS sorts, current_setting('jit') AS jit"
                               ).fetchone() == {"sorts": "on", "jit": "on"}  # put back for the rest of the transaction
        assert curation.nearest_older(cur, {**unit, "large": True}, T1)["id"] == found["id"]  # a transaction its own
        vectors = cur.execute("SELECT count(*) AS n FROM memory_embeddings WHERE project = 'acme'").fetchone()["n"]
    assert_walked_once(plan, embedder, vectors)
    assert str(found["id"]) == str(exact["id"]) == older.unit_id
    # the walk orders by the graph's half-precision copies; the cosine it gives is the stored vector's
    assert found["cosine"] == exact["cosine"] and found["cosine"] >= V.MERGE_MIN_COSINE


def assert_walked_once(plan: list[str], embedder, vectors: int) -> None:
    """The plan walked the model's graph once, then read the unit of each vector the walk reached (a scan or a probe,
    by the table's size)."""
    walks = [line for line in plan if embeddings.model_index_name(embedder.spec) in line]
    assert len(walks) == 1 and "loops=1)" in walks[0], plan
    probes = [line for line in plan if " on memory_units o " in line]
    assert len(probes) == 1 and f"loops={vectors})" in probes[0], plan


def test_the_walk_runs_once_on_statistics_that_have_not_seen_the_days_units(mem, conn, embedder, today):
    """Statistics of the units taken when the project had one peer of the newcomer's kind, and of the vectors after
    the day's writes, as autovacuum may leave them when curation starts: a plan that joined the walk made it the
    inner side of a loop over the older peers the estimate saw few of, walking the graph once per peer (50-600 ms a
    newcomer at 6,000 units, docs/scaling.md item 39); the walk is materialised, so it runs once."""
    mem.remember(project="acme", kind="env", type="semantic", title="Relay R-0 runs hot", body="Relay R-0 runs hot.")
    conn.execute("ANALYZE memory_units")
    for i in range(1, 31):
        mem.remember(project="acme", kind="env", type="semantic", title=f"Relay R-{i} runs hot at {10 * i} degrees",
                     body=f"Relay R-{i} in rack {i % 4} runs hot: {10 * i} degrees after the firmware {i}.")
    embed_all(conn, embedder)
    embeddings.ensure_model_index(conn, embedder.spec)
    conn.execute("ANALYZE memory_embeddings")
    with conn.cursor(row_factory=dict_row) as cur:
        newest = max(cur.execute(query("curation/day_units"), curation.day_units_params(T1, today)),
                     key=lambda unit: unit["number"])
        params = curation.nearest_params(newest, T1)
        with conn.transaction():
            cur.execute(query("curation/hnsw_scan"), {"ef_search": V.HNSW_EF_SEARCH})
            plan = [row["QUERY PLAN"] for row in cur.execute(
                "EXPLAIN (ANALYZE) " + embeddings.model_query("curation/nearest_older_hnsw", T1), params)]
    assert_walked_once(plan, embedder, 31)


def test_a_days_curation_awaits_only_its_last_commit_on_disk(mem, conn, embedder, today, monkeypatch):
    """Every newcomer's transaction but the last commits without waiting for its flush (a re-run curates again what a
    server crash loses, each revision once); the last one waits, and with it every commit before it."""
    for i in range(3):
        mem.remember(project="acme", kind="env", type="semantic", title=f"Relay R-{i} runs hot",
                     body=f"Relay R-{i} runs hot after firmware {i}.")
    embed_all(conn, embedder)
    modes, execute = [], conn.execute  # each newcomer's commit mode as its curated revision is written, in order

    def watched(statement, *args, **kwargs):
        if "SET curated_revision" in str(statement):
            modes.append(execute("SELECT current_setting('synchronous_commit')").fetchone()[0])
        return execute(statement, *args, **kwargs)

    monkeypatch.setattr(conn, "execute", watched)
    counts = curation.curate_day(conn, T1, today)
    assert sum(counts.values()) - counts["promoted"] == 3 and modes == ["off", "off", "on"]
    assert conn.execute("SELECT current_setting('synchronous_commit')").fetchone()[0] == "on"
    assert curation.curate_day(conn, T1, today) == {"merged": 0, "review": 0, "promoted": 0, "unchanged": 0}


def test_promotion_needs_two_sources_or_a_day(mem, conn, embedder, today):
    fact = dict(project="acme", kind="env", type="semantic", confidence=0.7)
    two = mem.remember(title="Builds need 8 GiB", body="Release builds need 8 GiB because the linker is greedy.",
                       task_id="T-1", **fact)
    mem.remember(title="Builds need 8 GiB", body="Release builds need 8 GiB because the linker is greedy.",
                 task_id="T-2", **fact)
    one = mem.remember(title="Cache on NFS", body="The build cache lives on NFS because local disks are small.",
                       task_id="T-3", **fact)
    embed_all(conn, embedder)
    counts = curation.curate_day(conn, T1, today)
    assert counts["promoted"] == 1, counts
    assert (mem.unit("acme", two.token)["status"], mem.unit("acme", one.token)["status"]) == ("active", "proposed")
    assert curation.curate_day(conn, T1, today)["promoted"] == 0  # a re-run of the day decides the same
    conn.execute("UPDATE memory_units SET created_at = created_at - interval '2 days'")
    assert curation.curate_day(conn, T1, today)["promoted"] == 1  # two days old, never conflicted
    assert mem.unit("acme", one.token)["status"] == "active"


def test_a_re_run_of_a_past_day_promotes_with_the_sources_that_day_had(mem, conn, embedder, today):
    """Regression (an attacker's pass): the promotion counted every source a unit has now, so re-running a past
    day's curation after a second task wrote the fact promoted the unit under that day, on a source of a later day.
    A day's promotion counts the sources it had by its end: a re-run decides the same."""

    fact = dict(project="acme", kind="env", type="semantic", confidence=0.7, title="Zeppelin port",
                body="The zeppelin service listens on port 7001 because 7000 is the registry's.")
    token = mem.remember(**fact, task_id="T-1").token
    for table, column in (("memory_units", "created_at"), ("memory_sources", "created_at"),
                          ("memory_inbox", "received_at")):  # written three days ago
        conn.execute(f"UPDATE {table} SET {column} = {column} - interval '3 days'")
    conn.execute("UPDATE memory_units SET valid_from = valid_from - interval '3 days'")
    conn.commit()
    day = today - timedelta(days=3)
    embed_all(conn, embedder)
    assert curation.curate_day(conn, T1, day)["promoted"] == 0
    mem.remember(**fact, task_id="T-2")  # a second task writes it today
    assert curation.curate_day(conn, T1, day)["promoted"] == 0
    assert mem.unit("acme", token)["status"] == "proposed"


def test_review_decisions_are_audited(mem, conn, embedder, today):
    deferred = mem.remember(project="acme", kind="note", type="semantic", title="VPN rollout deferred to Q3",
                            body="The VPN rollout was deferred to Q3 after the security review.")
    cancelled = mem.remember(project="acme", kind="note", type="semantic", title="VPN rollout cancelled",
                             body="The VPN rollout was cancelled after the security review.")
    low = mem.remember(project="acme", kind="note", type="semantic", title="Office moves in May",
                       body="The office moves to the new building in May.", confidence=0.4)
    embed_all(conn, embedder)
    curation.curate_day(conn, T1, today)
    with pytest.raises(Exception, match="not in review"):
        mem.decide("acme", deferred.token, "approve")
    mem.decide("acme", cancelled.token, "supersede", deferred.token, actor="alice")
    mem.decide("acme", low.token, "reject", actor="bob")
    old, new = mem.unit("acme", deferred.token), mem.unit("acme", cancelled.token)
    assert old["status"] == "superseded" and old["valid_until"] is not None
    assert new["status"] == "active" and new["supersedes_id"] == old["id"]
    assert mem.unit("acme", low.token)["status"] == "retired"
    actions = conn.execute("SELECT actor, action FROM audit_log WHERE action LIKE 'review_%' ORDER BY id").fetchall()
    assert actions == [("alice", "review_supersede"), ("bob", "review_reject")]
    assert mem.review_queue("acme") == []


def test_change_signal():
    assert curation.change_signal("VPN rollout deferred to Q3", "VPN rollout cancelled")
    assert curation.change_signal("Deploys on 3 nodes", "Deploys on 5 nodes")
    assert not curation.change_signal("Caroline went to a pride parade", "Caroline went to a support group")


FORGETTER = authz.Actor.for_project("acme", "alice", forget=True)


def merged_pair(mem, conn, embedder, today):
    (old_title, old_body), (new_title, new_body) = PARAPHRASES[0]
    canonical = mem.remember(project="acme", kind="env", type="semantic", title=old_title, body=old_body,
                             task_id="T-1", session_id="S-1")
    newcomer = mem.remember(project="acme", kind="env", type="semantic", title=new_title, body=new_body,
                            task_id="T-2", session_id="S-2")
    embed_all(conn, embedder)
    assert curation.curate_day(conn, T1, today)["merged"] == 1
    return canonical, newcomer


def test_forgetting_a_merged_canonical_takes_its_retired_duplicates_along(mem, conn, embedder, stored_text, today):
    """The newcomer a merge retired states the same fact in other words: it must not outlive the forgotten fact."""
    canonical, newcomer = merged_pair(mem, conn, embedder, today)
    mem.forget("acme", canonical.token, FORGETTER)
    gone = mem.unit("acme", newcomer.token)
    assert (gone["status"], gone["title"], gone["body"]) == ("forgotten", "", "")
    text = stored_text()
    for title, body in PARAPHRASES[0]:
        assert title not in text and body not in text
    assert quality.tombstones_with_text(conn) == []


def test_forgetting_a_merged_newcomer_takes_its_contribution_off_the_canonical(mem, conn, embedder, stored_text, today):
    canonical, newcomer = merged_pair(mem, conn, embedder, today)
    mem.forget("acme", newcomer.token, FORGETTER)
    kept = mem.unit("acme", canonical.token)
    assert kept["status"] == "active" and kept["title"] == PARAPHRASES[0][0][0]
    assert [(s["task_id"], s["session_id"]) for s in kept["sources"]] == [("T-1", "S-1")]
    new_title, new_body = PARAPHRASES[0][1]
    assert new_title not in stored_text() and new_body not in stored_text()
    assert quality.tombstones_with_text(conn) == []


def as_read(remembered, revision=1):
    """A remembered unit as curation read it (curation/day_units, curation/nearest_older): what a merge is given."""
    return {"id": remembered.unit_id, "project": "acme", "revision": revision}


def test_a_merge_with_a_unit_forgotten_meanwhile_does_not_happen(mem, conn):
    """Curation picked the pair before a forget committed: the merge must neither revive nor feed a tombstone."""
    (old_title, old_body), (new_title, new_body) = PARAPHRASES[0]
    canonical = mem.remember(project="acme", kind="env", type="semantic", title=old_title, body=old_body,
                             task_id="T-1")
    newcomer = mem.remember(project="acme", kind="env", type="semantic", title=new_title, body=new_body,
                            task_id="T-2")
    mem.forget("acme", canonical.token, FORGETTER)
    with conn.transaction():
        assert curation.merge(conn, as_read(newcomer), as_read(canonical)) is False
    assert mem.unit("acme", newcomer.token)["status"] == "active"
    assert [s["task_id"] for s in mem.unit("acme", canonical.token)["sources"]] == ["T-1"]
    other = mem.remember(project="acme", kind="env", type="semantic", title="Staging TLS",
                         body="Staging only takes TLS connections.", task_id="T-3")
    mem.forget("acme", newcomer.token, FORGETTER)
    with conn.transaction():
        assert curation.merge(conn, as_read(newcomer), as_read(other)) is False
    assert mem.unit("acme", newcomer.token)["status"] == "forgotten"
    assert [s["task_id"] for s in mem.unit("acme", other.token)["sources"]] == ["T-3"]


def private_newcomer(mem, older_private: bool = False) -> tuple[Any, Any, dict[str, str]]:
    """An older unit and ana's private paraphrase of it, the newcomer curation judges, with the newcomer's fact."""
    (old_title, old_body), (new_title, new_body) = PARAPHRASES[0]
    private = {"persona": "ana", "visibility": "private"}
    older = mem.remember(project="acme", kind="env", type="semantic", title=old_title, body=old_body, task_id="T-1",
                         **(private if older_private else {}))
    fact = dict(project="acme", kind="env", type="semantic", title=new_title, body=new_body)
    return older, mem.remember(**fact, task_id="T-2", **private), fact


class RacingWrite(threading.Thread):
    """bo's private write of a fact, in a thread of its own, racing a curation transaction: what it returned, or the
    error it met (the outcome under test)."""

    def __init__(self, mem, fact: dict[str, str]) -> None:
        super().__init__()
        self.mem, self.fact, self.result = mem, fact, None

    def run(self) -> None:
        try:
            self.result = self.mem.remember(**self.fact, task_id="T-3", persona="bo", visibility="private")
        except Exception as error:  # the outcome under test
            self.result = error

    def outcome(self) -> Any:
        self.join(timeout=30)
        assert not self.is_alive()
        return self.result


@pytest.mark.parametrize("judged", ["review", "merge"])
def test_curation_never_deadlocks_against_a_write_of_the_newcomers_text(mem, conn, clean, judged):
    """Regression (an attacker's pass): curation updated a newcomer (sent to review, or merged), then, updating it a
    second time in its transaction (the revision curated), had a foreign key's check read the project's counter row;
    a remember() of the newcomer's text held that row and waited for the newcomer's row (here to widen a private
    unit's audience): a deadlock, and the write was the one rolled back. A review or a merge now takes the counter
    row before any unit's row, as the writes do, and the write waits for it instead."""
    older, newcomer, fact = private_newcomer(mem)
    writer = RacingWrite(mem, fact)
    with conn.transaction():
        if judged == "review":
            assert curation.send_to_review(conn, as_read(newcomer), {"id": older.unit_id, "cosine": 0.9})
        else:
            assert curation.merge(conn, as_read(newcomer), as_read(older))
        writer.start()
        until_waiting_on_a_lock(clean)  # for the counter row now, for the newcomer's row before
        conn.execute("UPDATE memory_units SET curated_revision = 1 WHERE id = %s", (newcomer.unit_id,))
    written = writer.outcome()
    assert getattr(written, "token", None), written
    if judged == "review":  # still live: the write is its source, and widens its audience
        assert written.token == newcomer.token
        assert conn.execute("SELECT status, private_to FROM memory_units WHERE id = %s",
                            (newcomer.unit_id,)).fetchone() == (V.STATUS_REVIEW, ["ana", "bo"])


def test_a_review_decision_never_deadlocks_against_a_write_of_the_units_text(mem, conn, clean, monkeypatch):
    """Regression (a review): a decision to supersede locked the unit in review, updated it (what it replaces), then
    updated it again (its status), so a foreign key's check read the counter row that a write of the unit's text held
    while it waited for the unit: a deadlock. A decision takes the counter row first, as curation does."""
    from memory_assets import lifecycle

    older, newcomer, fact = private_newcomer(mem, older_private=True)
    with conn.transaction():
        assert curation.send_to_review(conn, as_read(newcomer), {"id": older.unit_id, "cosine": 0.9})
    writer = RacingWrite(mem, fact)
    real_supersede = lifecycle.supersede

    def supersede_then_race(*args, **kwargs):
        real_supersede(*args, **kwargs)
        writer.start()
        until_waiting_on_a_lock(clean)  # for the counter row now, for the unit's row before

    monkeypatch.setattr(lifecycle, "supersede", supersede_then_race)
    curation.decide(conn, "acme", newcomer.token, "supersede", target=older.token, actor="alice")
    written = writer.outcome()
    assert getattr(written, "token", None) == newcomer.token, written
    assert conn.execute("SELECT status, private_to FROM memory_units WHERE id = %s",
                        (newcomer.unit_id,)).fetchone() == (V.STATUS_ACTIVE, ["ana", "bo"])


def test_a_merge_holding_its_units_never_blocks_the_days_decay_scores(mem, conn, clean):
    """Regression (an attacker's pass): a merge locked its two units FOR UPDATE, which a foreign key's check waits
    for; decay's insert of the day's scores checks each unit's key in an order of its own, so the two deadlocked. A
    merge locks them as an update of theirs would (FOR NO KEY UPDATE): decay scores them meanwhile."""
    import psycopg

    from memory_assets import decay

    (old_title, old_body), (new_title, new_body) = PARAPHRASES[0]
    canonical = mem.remember(project="acme", kind="env", type="semantic", title=old_title, body=old_body,
                             task_id="T-1")
    newcomer = mem.remember(project="acme", kind="env", type="semantic", title=new_title, body=new_body,
                            task_id="T-2")
    with conn.transaction():
        assert curation.merge(conn, as_read(newcomer), as_read(canonical))
        with psycopg.connect(clean) as scorer:
            scorer.execute("SET lock_timeout = '3s'")
            assert decay.score_day(scorer, date.today())["scored"] >= 2
