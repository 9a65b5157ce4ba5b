"""Lifecycle on the real database: supersession, forget without resurrection, votes, decay, TTL, consolidation."""

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memory_assets import authz, consolidation, decay, lifecycle, quality
from memory_assets import vocabulary as V
from memory_assets.defs import runner
from memory_assets.errors import ScopeError, ValidationError
from tests.cases import SERVING_MODEL as T1
from tests.cases import embed_all

TODAY = datetime.now(UTC).date()



def note(mem, title, body, **kw):
    return mem.remember(project="acme", kind="note", type=kw.pop("type", "semantic"), title=title, body=body, **kw)


def test_supersession_via_remember_keeps_history_both_ways(mem, conn, embedder):
    first = note(mem, "Standup at 9", "The daily standup is at 9:00 UTC.")
    second = note(mem, "Standup at 10", "The daily standup moved to 10:00 UTC.", supersedes=first.token)
    third = note(mem, "Standup at 11", "The daily standup moved to 11:00 UTC.", supersedes=second.token)
    old = mem.unit("acme", first.token)
    assert old["status"] == "superseded" and old["valid_until"] is not None
    assert mem.unit("acme", third.token)["supersedes_id"] == mem.unit("acme", second.token)["id"]
    chain = [h["token"] for h in mem.history("acme", second.token)]
    assert chain == [first.token, second.token, third.token]
    with pytest.raises(ValidationError, match="not live"):   # a closed unit cannot be superseded again
        note(mem, "Standup at 12", "The daily standup moved to 12:00 UTC.", supersedes=first.token)
    with pytest.raises(ValidationError, match="cycle"), conn.transaction():
        lifecycle.supersede(conn, first.unit_id, third.unit_id)
    assert quality.supersession_problems(conn) == ([], [])
    embed_all(conn, embedder)
    middle = mem.unit("acme", second.token)["valid_from"] + timedelta(microseconds=1)
    assert [h.token for h in mem.recall("acme", "when is the daily standup", k=3)] == [third.token]
    assert [h.token for h in mem.recall("acme", "when is the daily standup", k=3, as_of=middle)] == [second.token]


SECRET_FACT = dict(title="Blue heron protocol", body="The blue heron protocol rotates the lab keys every full moon.")


def test_a_private_unit_cannot_supersede_what_more_readers_see(mem, conn):
    shared = mem.remember(project="acme", kind="env", type="semantic", title="Deploy window",
                          body="Deploys happen on Tuesdays after the standup.")
    mine = dict(project="acme", kind="env", type="semantic", title="Deploy window moved", persona="ana",
                visibility="private", body="Deploys happen on Thursdays now.")
    with pytest.raises(ValidationError, match="supersedes: a private unit cannot replace one that more readers see"):
        mem.remember(**mine, supersedes=shared.token)
    assert mem.unit("acme", shared.token)["status"] == "active"  # nothing half-written: no new unit either
    assert [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("memory_units", "memory_inbox")] == [1, 1]
    own = mem.remember(**mine)
    assert mem.remember(**{**mine, "body": "Deploys happen on Fridays now."}, supersedes=own.token).status == "active"
    assert mem.unit("acme", own.token)["status"] == "superseded"


def test_forget_leaves_no_text_anywhere_even_after_rematerialising(mem, conn, stored_text):
    kept = note(mem, "Kept fact", "The cafeteria opens at noon on Fridays.", task_id="T-0")
    gone = note(mem, task_id="T-1", **SECRET_FACT)
    instance = runner.dagster_instance(mem.url)
    assert all(r.success for r in runner.materialize_day(TODAY, instance))
    with pytest.raises(ScopeError):
        mem.forget("acme", gone.token, authz.Actor.for_project("acme"), reason="no scope")
    mem.forget("acme", gone.token, authz.Actor.for_project("acme", "alice", forget=True), reason="user asked")
    for _ in range(2):  # re-materialise the ledger, embeddings, curation (and the rest) of the day
        assert all(r.success for r in runner.materialize_day(TODAY, instance))
    # a later capture of the same text (another task) is refused, never resurrected
    again = note(mem, task_id="T-2", **SECRET_FACT)
    assert (again.status, again.reason) == ("rejected", "forgotten")
    everything = stored_text() + stored_text("dagster")
    for fragment in ("blue heron", "Blue heron", "full moon", "lab keys"):
        assert fragment not in everything, fragment
    unit = mem.unit("acme", gone.token)
    assert unit["status"] == "forgotten" and unit["number"] == 2 and unit["title"] == ""
    assert conn.execute("SELECT count(*) FROM memory_embeddings WHERE unit_id = %s", (gone.unit_id,)).fetchone()[0] == 0
    assert conn.execute("SELECT action FROM audit_log WHERE unit_id = %s AND action = 'forget'",
                        (gone.unit_id,)).fetchone() == ("forget",)
    assert [h.token for h in mem.recall("acme", "blue heron protocol lab keys", k=5)] == [kept.token]
    assert quality.tombstones_with_text(conn) == []


def test_twenty_concurrent_confirms_from_one_task_count_once(mem, conn):
    token = note(mem, "Fact", "The build server restarts on Sundays.").token
    barrier = threading.Barrier(20)

    def confirm(_):
        barrier.wait()
        return mem.confirm("acme", token, task_id="T-same")

    with ThreadPoolExecutor(20) as pool:
        list(pool.map(confirm, range(20)))
    unit = mem.unit("acme", token)
    assert (unit["confirms"], unit["flags"]) == (1, 0)
    assert unit["trust"] == pytest.approx(lifecycle.trust_of(1, 0))
    assert conn.execute("SELECT count(*) FROM memory_votes").fetchone()[0] == 1


def test_trust_formula_and_flag_threshold(mem):
    token = note(mem, "Fact", "The build server restarts on Sundays.").token
    assert lifecycle.trust_of(0, 0) == pytest.approx(V.DEFAULT_TRUST)
    assert lifecycle.trust_of(3, 0) > lifecycle.trust_of(1, 0) > V.DEFAULT_TRUST > lifecycle.trust_of(0, 1)
    for i in range(V.FLAG_THRESHOLD - 1):
        assert mem.flag("acme", token, task_id=f"T-{i}")["status"] == "active"
    result = mem.flag("acme", token, task_id="T-last")
    assert result["status"] == "flagged" and result["trust"] < V.DEFAULT_TRUST
    assert mem.recall("acme", "build server restarts", k=5).hits == []


def test_decay_of_a_day_rematerialised_is_identical(mem, conn):
    day = TODAY - timedelta(days=1)
    token = note(mem, "Fact", "The build server restarts on Sundays.").token
    conn.execute("UPDATE memory_units SET created_at = now() - interval '40 days', "
                 "valid_from = now() - interval '40 days'")
    unit_id = mem.unit("acme", token)["id"]
    conn.execute("INSERT INTO memory_events (unit_id, project, task_id, kind, at) VALUES "
                 "(%s, 'acme', 'T-1', 'read', now() - interval '3 days')", (unit_id,))
    first = decay.score_day(conn, day)
    rows = conn.execute("SELECT * FROM decay_scores WHERE day = %s ORDER BY unit_id", (day,)).fetchall()
    # activity after the day (a confirmation today) must not change that day's scores
    mem.confirm("acme", token, task_id="T-later")
    assert decay.score_day(conn, day) == {**first, "expired": 0, "stale": 0}
    assert conn.execute("SELECT * FROM decay_scores WHERE day = %s ORDER BY unit_id", (day,)).fetchall() == rows
    _, _, _, recency, activation, trust, expired, _, _ = rows[0]
    assert 0 < recency < 1 and activation > 0 and not expired
    assert V.TRUST_FLOOR < trust < V.DEFAULT_TRUST  # 40 days unconfirmed: past the 30-day grace, decaying


def test_ttl_expiry_takes_an_episode_out_of_recall_but_keeps_its_row(mem, conn, embedder):
    episode = note(mem, "Deploy incident", "The Friday deploy failed because the cache volume filled up.",
                   type="episodic", valid_from=datetime.now(UTC) - timedelta(days=V.EPISODIC_TTL_DAYS + 5))
    fresh = note(mem, "Deploy incident today", "Today's deploy failed because the cache volume filled up.",
                 type="episodic")
    embed_all(conn, embedder)
    assert {h.token for h in mem.recall("acme", "deploy failed cache volume", k=5)} == {episode.token, fresh.token}
    counts = decay.score_day(conn, TODAY)
    assert counts["expired"] == 1
    assert [h.token for h in mem.recall("acme", "deploy failed cache volume", k=5)] == [fresh.token]
    row = mem.unit("acme", episode.token)
    assert row is not None and row["body"].startswith("The Friday deploy")
    then = datetime.now(UTC) - timedelta(days=V.EPISODIC_TTL_DAYS)
    assert episode.token in [h.token for h in mem.recall("acme", "deploy failed cache volume", k=5, as_of=then)]


TOPICS = {
    "database": ["The {} database replica lagged behind the primary",
                 "Postgres {} vacuum ran for hours on the orders table",
                 "The {} connection pool to PostgreSQL was exhausted"],
    "frontend": ["The {} React page rendered a blank screen in Safari",
                 "CSS for the {} checkout button broke on mobile",
                 "The {} login form lost focus after a re-render"],
    "billing": ["Invoice {} was charged twice to the customer's credit card",
                "The {} refund to the customer failed at the payment provider",
                "Stripe webhook {} for a subscription renewal arrived late"],
    "hiring": ["Interview panel {} for the backend engineer candidate",
               "Recruiter scheduled onsite interview {} with a candidate",
               "Offer letter {} sent to the new engineering hire"],
    "travel": ["Flight {} to Berlin for the offsite was delayed",
               "Hotel booking {} near the conference venue was cancelled",
               "Train ticket {} to the Paris customer visit was refunded"],
}


def test_a_week_of_200_episodes_on_5_topics_consolidates_into_about_5_units(mem, conn, embedder):
    rng = np.random.default_rng(3)
    for i in range(200):
        topic = list(TOPICS)[i % 5]
        text = TOPICS[topic][rng.integers(0, 3)].format(f"#{i}")
        mem.remember(project="acme", kind="note", type="episodic", title=text[:80], body=text + ".", task_id=f"T-{i}")
    embed_all(conn, embedder)
    week = TODAY - timedelta(days=TODAY.weekday())
    counts = consolidation.consolidate_week(conn, T1, week)
    assert 4 <= counts["clusters"] <= 7, counts
    assert counts["members"] >= 150
    rows = conn.execute("SELECT consolidated_unit, members FROM consolidation_clusters").fetchall()
    for unit_id, members in rows:
        unit = conn.execute("SELECT type, status FROM memory_units WHERE id = %s", (unit_id,)).fetchone()
        assert unit == ("semantic", "active")
        linked = conn.execute("SELECT count(*) FROM memory_sources WHERE unit_id = %s AND source_ref LIKE 'mem-%%'",
                              (unit_id,)).fetchone()[0]
        assert linked == len(members)
    assert quality.unlinked_consolidations(conn) == []
    # re-materialising the week replaces, never duplicates
    before = conn.execute("SELECT count(*) FROM memory_units WHERE type = 'semantic'").fetchone()[0]
    assert consolidation.consolidate_week(conn, T1, week)["clusters"] == counts["clusters"]
    assert conn.execute("SELECT count(*) FROM memory_units WHERE type = 'semantic'").fetchone()[0] == before


def test_private_episodes_are_never_consolidated_into_a_shared_unit(mem, conn, embedder):
    for i in range(6):
        mem.remember(project="acme", kind="note", type="episodic", title=f"Ana hummed the tune #{i} while deploying",
                     body=f"Ana hummed the tune #{i} while deploying.", task_id=f"T-{i}", persona="ana",
                     visibility="private")
    embed_all(conn, embedder)
    assert consolidation.consolidate_week(conn, T1, TODAY - timedelta(days=TODAY.weekday()))["clusters"] == 0
    assert conn.execute("SELECT count(*) FROM memory_units WHERE type = 'semantic'").fetchone()[0] == 0


def test_a_configured_summariser_writes_the_consolidated_text(mem, conn, embedder):
    for i in range(6):
        mem.remember(project="acme", kind="note", type="episodic", title=f"Flight {i} to Berlin delayed",
                     body=f"Flight #{i} to Berlin for the offsite was delayed by fog.", task_id=f"T-{i}")
    embed_all(conn, embedder)
    week = TODAY - timedelta(days=TODAY.weekday())
    seen = []

    def summarise(texts):
        seen.append(len(texts))
        return "Berlin flights delayed", "Offsite flights to Berlin are often delayed by fog."

    assert consolidation.consolidate_week(conn, T1, week, summarizer=summarise)["clusters"] == 1
    assert seen == [6]
    assert conn.execute("SELECT body FROM memory_units WHERE type = 'semantic'").fetchone()[0].startswith("Offsite")
