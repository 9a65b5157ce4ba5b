"""Lifecycle on the real database: supersession, forget without resurrection, votes, decay, TTL, consolidation."""

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import numpy as np
import psycopg
import pytest

from memory_assets import authz, consolidation, database, decay, gates, lifecycle, quality
from memory_assets import vocabulary as V
from memory_assets.database import query
from memory_assets.defs import runner
from memory_assets.errors import ScopeError, ValidationError
from memory_assets.ledger import capture
from tests.cases import FLIGHTS, REPO, backdate, embed_all, flights, function_in_migration
from tests.cases import SERVING_MODEL as T1


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
    with pytest.raises(ValidationError, match="no longer live"), conn.transaction():  # a cycle: refused before
        lifecycle.supersede(conn, first.unit_id, third.unit_id)
    assert quality.supersession_problems(conn) == ([], [])
    embed_all(conn, embedder)
    middle = mem.unit("acme", second.token)["valid_from"] + timedelta(microseconds=1)
    assert [h.token for h in mem.recall("acme", "when is the daily standup", k=3)] == [third.token]
    assert [h.token for h in mem.recall("acme", "when is the daily standup", k=3, as_of=middle)] == [second.token]


SECRET_FACT = dict(title="Blue heron protocol", body="The blue heron protocol rotates the lab keys every full moon.")


def supersede_at_once(mem, start: threading.Barrier, title: str, text: str, old: str) -> str:
    start.wait()
    try:
        return note(mem, title, text, supersedes=old).status
    except ValidationError as refused:
        return str(refused)


def test_crossed_supersedes_through_duplicates_leave_one_live_unit_and_no_cycle(mem, conn):
    """Regression (an attacker's pass): X replaced by Y's text while Y was replaced by X's text, at once. Both
    writes were duplicates, so each linked the other unit: both cycle checks ran before either committed, the fact
    was left with no live unit, and its history walked the cycle for ever (or the two deadlocked)."""
    for i in range(6):
        title, texts = f"Cache size {i}", [f"The cache of worker {i} holds {n} entries." for n in (512, 1024)]
        x, y = (note(mem, title, text) for text in texts)
        start = threading.Barrier(2)
        with ThreadPoolExecutor(2) as pool:  # each write duplicates the unit the other one closes
            crossed = [pool.submit(supersede_at_once, mem, start, title, text, old)
                       for text, old in zip(reversed(texts), (x.token, y.token), strict=True)]
            outcomes = sorted(c.result() for c in crossed)
        assert outcomes == ["duplicate", "supersedes: the replacing unit is no longer live or already replaces "
                                         "another unit"]
        live = conn.execute("SELECT count(*) FROM memory_units WHERE title = %s AND status = 'active'",
                            (title,)).fetchone()[0]
        assert live == 1
        assert len(mem.history("acme", x.token)) == 2
    assert quality_cycles(conn) == []


def test_a_duplicate_that_already_replaces_a_unit_cannot_be_re_pointed(mem, conn):
    """Regression: a write duplicating b (which replaced a) with supersedes=c moved b's link from a to c, and a's
    history lost its successor."""
    a = note(mem, "Port of the API", "The API listens on port 8080.")
    b = note(mem, "Port of the API", "The API listens on port 9090.", supersedes=a.token)
    c = note(mem, "Timeout of the API", "The API times out after 30 seconds.")
    with pytest.raises(ValidationError, match=r"^supersedes: the replacing unit is no longer live or already"):
        note(mem, "Port of the API", "The API listens on port 9090.", supersedes=c.token)
    assert [h["token"] for h in mem.history("acme", a.token)] == [a.token, b.token]
    assert mem.unit("acme", c.token)["status"] == "active"


def test_history_ends_on_a_cycle_left_behind(mem, conn):
    """A cycle (from a bug or a manual edit) must not make history, or the next supersede's check, walk for ever."""
    x = note(mem, "Cache", "The cache holds 512 entries.")
    y = note(mem, "Cache", "The cache holds 1024 entries.", supersedes=x.token)
    conn.execute("UPDATE memory_units SET supersedes_id = (SELECT id FROM memory_units WHERE number = 2) "
                 "WHERE number = 1")
    conn.commit()
    assert sorted(h["token"] for h in mem.history("acme", x.token)) == [x.token, y.token]
    assert note(mem, "Cache", "The cache holds 4096 entries.", supersedes=y.token).status == "active"
    on_cycle = {str(r[0]) for r in conn.execute("SELECT id FROM memory_units WHERE number IN (1, 2)")}
    assert set(quality_cycles(conn)) == on_cycle  # the quality probe finds what is left


def quality_cycles(conn):
    return [r[0] for r in conn.execute(query("quality/supersession_cycles")).fetchall()]


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
    assert mem.unit("acme", own.token, authz.Actor.reader("acme", "ana"))["status"] == "superseded"


def test_a_writer_cannot_supersede_a_unit_private_to_another_persona(mem, conn):
    """Regression: bo's project-visible write replaced ana's private fact in her own recall, and the error for a
    missing token told him hers existed. A unit private to others is no unit to its writer, in the same words."""
    hers = mem.remember(project="acme", kind="env", type="semantic", title="Vault rotation", persona="ana",
                        visibility="private", body="The vault keys rotate on the first Monday of each month.")
    replacement = dict(project="acme", kind="env", type="semantic", title="Vault rotation moved", persona="bo",
                       body="The vault keys rotate every Friday now.")
    for writer in ({**replacement}, {**replacement, "visibility": "private"}, {k: v for k, v in replacement.items()
                                                                               if k != "persona"}):
        with pytest.raises(ValidationError) as refused:
            mem.remember(**writer, supersedes=hers.token)
        assert str(refused.value) == f"supersedes: no unit {hers.token} in project acme"
    with pytest.raises(ValidationError) as missing:
        mem.remember(**replacement, supersedes="mem-9")
    assert str(missing.value) == "supersedes: no unit mem-9 in project acme"
    assert mem.unit("acme", hers.token, authz.Actor.reader("acme", "ana"))["status"] == "active"
    assert [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("memory_units", "memory_inbox")] == [1, 1]
    own = mem.remember(project="acme", kind="env", type="semantic", title="Vault rotation moved", persona="ana",
                       visibility="private", body="The vault keys rotate every Friday now.", supersedes=hers.token)
    assert own.status == "active"
    assert mem.unit("acme", hers.token, authz.Actor.reader("acme", "ana"))["status"] == "superseded"


def test_forget_leaves_no_text_anywhere_even_after_rematerialising(mem, conn, stored_text, today):
    kept = note(mem, "Kept fact", "The cafeteria opens at noon on Fridays.", task_id="T-0")
    gone = note(mem, task_id="T-1", **SECRET_FACT)
    instance = runner.dagster_instance(mem.url)
    assert all(r.success for r in runner.materialize_day(today, instance))
    with pytest.raises(ScopeError):
        mem.forget("acme", gone.token, authz.Actor.for_project("acme"), reason="no scope")
    mem.forget("acme", gone.token, authz.Actor.for_project("acme", "alice", forget=True), reason="user asked")
    for _ in range(2):  # re-materialise the ledger, embeddings, curation (and the rest) of the day
        assert all(r.success for r in runner.materialize_day(today, instance))
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


def test_a_forget_reason_past_its_limit_is_refused_before_any_lock(mem, conn):
    """Regression (an attacker's pass): an agent's reason of any size reached the audit log, and was scanned for
    credentials while the forget held the project's locks (13 s for another forget to wait)."""
    token = note(mem, "Cache", "The cache is warmed at 06:00 because traffic peaks at 07:00.").token
    with pytest.raises(ValidationError, match=rf"^reason: at most {V.AUDIT_TEXT_MAX_CHARS} characters"):
        mem.forget("acme", token, FORGETTER, reason="key " + "a_" * 20_000)
    with pytest.raises(ValidationError, match=r"^reason: must be a string"):
        mem.forget("acme", token, FORGETTER, reason=["asked"])
    assert mem.unit("acme", token)["status"] == "active"
    mem.forget("acme", token, FORGETTER, reason="r" * V.AUDIT_TEXT_MAX_CHARS)
    assert conn.execute("SELECT length(reason) FROM audit_log WHERE action = 'forget'").fetchone()[0] == 500


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


def test_a_forgotten_unit_takes_no_vote(mem, conn):
    """Regression (an attacker's pass): confirm and flag still counted on a tombstone."""
    token = note(mem, "Cache", "The cache is warmed at 06:00 because traffic peaks at 07:00.").token
    mem.forget("acme", token, FORGETTER, reason="asked")
    for vote in (mem.confirm, mem.flag):
        with pytest.raises(ValidationError, match=f"^token: no unit {token} in project acme"):
            vote("acme", token, task_id="T-1")
    assert conn.execute("SELECT count(*) FROM memory_votes").fetchone()[0] == 0


def test_trust_formula_and_flag_threshold(mem):
    token = note(mem, "Fact", "The build server restarts on Sundays.").token
    assert lifecycle.trust_of(0, 0) == pytest.approx(V.DEFAULT_TRUST)
    assert lifecycle.trust_of(3, 0) > lifecycle.trust_of(1, 0) > V.DEFAULT_TRUST > lifecycle.trust_of(0, 1)
    for i in range(V.FLAG_THRESHOLD - 1):
        assert mem.flag("acme", token, task_id=f"T-{i}")["status"] == "active"
    result = mem.flag("acme", token, task_id="T-last")
    assert result["status"] == "flagged" and result["trust"] < V.DEFAULT_TRUST
    assert mem.recall("acme", "build server restarts", k=5).hits == []


def test_a_vote_reaches_a_private_unit_only_as_its_persona(mem, conn):
    """Regression: any caller could flag a unit private to another persona (enough flags take it out of her recall)
    by its token. A vote reads the unit as recall does: only the persona it is private to, in unit_id_of's words
    for every other voter."""
    hers = mem.remember(project="acme", kind="env", type="semantic", title="Vault rotation", persona="ana",
                        visibility="private", body="The vault keys rotate on the first Monday of each month.")
    shared = note(mem, "Fact", "The build server restarts on Sundays.")
    for vote, persona in ((mem.flag, None), (mem.flag, "bo"), (mem.confirm, "bo"), (mem.flag, "api")):
        with pytest.raises(ValidationError) as refused:
            vote("acme", hers.token, task_id="T-1", persona=persona)
        assert str(refused.value) == f"token: no unit {hers.token} in project acme"
    assert conn.execute("SELECT count(*) FROM memory_votes").fetchone()[0] == 0
    assert mem.flag("acme", hers.token, task_id="T-1", persona="ana")["flags"] == 1
    assert mem.flag("acme", shared.token, task_id="T-1")["flags"] == 1  # a shared unit: every voter
    assert mem.confirm("acme", shared.token, task_id="T-2", persona="bo")["confirms"] == 1


def test_decay_of_a_day_rematerialised_is_identical(mem, conn, today):
    day = today - timedelta(days=1)
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


def test_decay_of_a_day_rematerialised_after_votes_changed_and_units_left_or_came_back_is_identical(mem, conn,
                                                                                                        today):
    """Invariant 5 against what changes after a day: a task's vote turned round, a unit superseded, one forgotten, and
    one retired before the day's end but made active again since; the day re-run gives the rows it gave."""
    day = today - timedelta(days=1)
    kept, replaced, forgotten, revived = (note(mem, f"Fact {i}", f"The build server {i} restarts on Sundays.").token
                                          for i in ("north", "south", "east", "west"))
    mem.confirm("acme", kept, task_id="T-1")
    revived_id = mem.unit("acme", revived)["id"]
    conn.execute("UPDATE memory_units SET status = 'retired' WHERE id = %s", (revived_id,))
    backdate(conn, (("memory_units", "created_at"), ("memory_units", "valid_from"), ("memory_changes", "at"),
                    ("memory_votes", "at"), ("memory_vote_history", "at")), "3 days")
    decay.score_day(conn, day)
    rows = conn.execute("SELECT * FROM decay_scores WHERE day = %s ORDER BY unit_id", (day,)).fetchall()
    assert len(rows) == 3 and revived_id not in {r[1] for r in rows}  # retired at the day's end: not scored

    mem.flag("acme", kept, task_id="T-1")  # the same task changes its vote today
    note(mem, "Fact south, corrected", "The build server south restarts on Saturdays.", supersedes=replaced)
    mem.forget("acme", forgotten, FORGETTER, reason="user asked")
    conn.execute("UPDATE memory_units SET status = 'active' WHERE id = %s", (revived_id,))

    decay.score_day(conn, day)
    assert conn.execute("SELECT * FROM decay_scores WHERE day = %s ORDER BY unit_id", (day,)).fetchall() == rows
    assert quality.units_without_decay(conn, day) == []  # the check reads the day's live units the same way
    assert mem.unit("acme", kept)["flags"] == 1  # the vote did change: only the past day ignores it


def test_a_days_rerun_reads_each_units_status_then_from_its_first_change_since(mem, conn, today):
    """A unit changed since a day's end had, at that end, the status its first change since replaced (sql/044 keeps
    it on each journal row, read by time alone). On a store the release before journaled, sql/044 fills the rows'
    prior statuses from each unit's row before them, and the trigger that keeps them is in place from the upgrade's
    commit on (its function file applied in the same transaction): the next update keeps its prior status too."""
    day = today - timedelta(days=1)
    left, came_back = (note(mem, f"Fact {i}", f"The build server {i} restarts on Sundays.").unit_id
                       for i in ("north", "south"))
    conn.execute("UPDATE memory_units SET status = 'retired' WHERE id = %s", (came_back,))
    backdate(conn, (("memory_units", "created_at"), ("memory_units", "valid_from"), ("memory_changes", "at")), "3 days")
    conn.execute("UPDATE memory_units SET status = 'retired' WHERE id = %s", (left,))  # since the day's end
    conn.execute("UPDATE memory_units SET status = 'active' WHERE id = %s", (came_back,))
    prior = "SELECT unit_id::text, status, prior_status FROM memory_changes ORDER BY seq"
    journal = conn.execute(prior).fetchall()
    assert [row[2] for row in journal] == [None, None, "active", "active", "retired"]  # the inserts have none

    conn.execute(function_in_migration("memory_units_journal", "002_embeddings.sql"))  # the release before's trigger
    conn.execute("UPDATE memory_changes SET prior_status = NULL")
    upgrade = "044_journal_keeps_each_changes_prior_status.sql"
    conn.execute("DELETE FROM schema_migrations WHERE name = %s", (upgrade,))
    assert database.migrate(mem.url) == [upgrade, "functions/memory_units_journal.sql"]
    assert conn.execute(prior).fetchall() == journal
    conn.execute("UPDATE memory_units SET status = 'stale' WHERE id = %s", (came_back,))
    assert conn.execute(prior).fetchall()[-1] == (came_back, "stale", "active")

    decay.score_day(conn, day)
    assert [row[0] for row in conn.execute("SELECT unit_id::text FROM decay_scores WHERE day = %s", (day,))] == [left]
    assert quality.units_without_decay(conn, day) == []


def test_a_vote_written_by_any_writer_lands_in_the_vote_history_dated_by_its_change(mem, conn):
    """The history is kept by a trigger, so no writer of memory_votes (an older release, a hand-written fix) can
    change a vote without a past day's decay seeing when; an update that keeps the vote adds nothing."""
    unit_id = note(mem, "Fact", "The build server restarts on Sundays.").unit_id
    conn.execute("INSERT INTO memory_votes (unit_id, project, task_id, vote, at) "
                 "VALUES (%s, 'acme', 'T-1', 1, now() - interval '5 days')", (unit_id,))
    conn.execute("UPDATE memory_votes SET at = at - interval '1 day'")  # the same vote: no change
    conn.execute("UPDATE memory_votes SET vote = -1")  # changed by hand, its time left as it was
    history = conn.execute("SELECT vote, now() - at < interval '1 minute' FROM memory_vote_history ORDER BY seq")
    assert history.fetchall() == [(1, False), (-1, True)]


@pytest.mark.parametrize("table", ["memory_votes", "memory_vote_history", "memory_task_arms",
                                   "memory_task_arm_history"])
def test_no_vote_or_arm_is_ever_deleted(mem, conn, table):
    """A past day's decay and read rate re-run from the histories the triggers keep on insert and update: a vote or
    an arm deleted by hand would pass them by, so a row's delete is refused in both tables and both histories."""
    unit_id = note(mem, "Fact", "The build server restarts on Sundays.").unit_id
    conn.execute("INSERT INTO memory_votes (unit_id, project, task_id, vote) VALUES (%s, 'acme', 'T-1', 1)", (unit_id,))
    conn.execute("INSERT INTO memory_task_arms (task_id, value, source) VALUES ('T-1', 'on', 'task')")
    with pytest.raises(psycopg.errors.RaiseException, match=f"{table} keeps every row"):
        conn.execute(f"DELETE FROM {table}")
    assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 1


def test_a_row_captured_on_a_day_and_folded_after_it_was_scored_joins_that_days_rerun(mem, conn, today):
    """A day scored before its fold caught up (a late or failed fold) read an incomplete ledger: the re-run after
    the fold scores the unit captured that day, as re-materialising downstream of a repaired upstream should, and
    the check then finds every unit of the day scored."""
    day = today - timedelta(days=1)
    note(mem, "Fact", "The build server restarts on Sundays.")
    late = gates.validate(project="acme", kind="note", type="semantic", title="Late fact",
                          body="The build server north restarts on Mondays.", task_id="T-late")
    assert capture.remember_many(conn, [late], fold_now=False)["inserted"] == 0
    backdate(conn, (("memory_units", "created_at"), ("memory_units", "valid_from"), ("memory_changes", "at"),
                    ("memory_inbox", "received_at")), "3 days")
    assert decay.score_day(conn, day)["scored"] == 1
    assert capture.fold(conn, keys=[late.idempotency_key])["inserted"] == 1
    assert quality.units_without_decay(conn, day) != []  # the day's scores lack the unit folded since
    conn.execute("UPDATE memory_units SET status = 'retired' WHERE title = 'Late fact'")  # live when captured
    assert decay.score_day(conn, day)["scored"] == 2
    assert quality.units_without_decay(conn, day) == []


def test_a_past_days_rerun_expires_no_episode_that_left_since(mem, conn, today):
    """A re-run (or a backfill) of a past day scores an episode live then as expired, but one retired since is left as
    it is: the day's decay marks only live units."""
    day = today - timedelta(days=1)
    then = datetime.now(UTC) - timedelta(days=V.EPISODIC_TTL_DAYS + 5)
    episode = note(mem, "Deploy incident", "The Friday deploy failed because the cache volume filled up.",
                   type="episodic", valid_from=then)
    for table, column in (("memory_units", "created_at"), ("memory_changes", "at")):
        conn.execute(f"UPDATE {table} SET {column} = %s", (then,))
    conn.execute("UPDATE memory_units SET status = 'retired', updated_by = 'curation'")
    assert decay.score_day(conn, day) == {"scored": 1, "expired": 0, "stale": 0}
    assert conn.execute("SELECT expired FROM decay_scores WHERE day = %s", (day,)).fetchone()[0] is True
    unit = mem.unit("acme", episode.token)
    assert (unit["expired_at"], unit["updated_by"]) == (None, "curation")


def test_a_past_days_rerun_marks_no_unit_stale_that_a_later_day_found_trusted(mem, conn, today):
    """A re-run (or a backfill) of a day reproduces that day's scores, stale flag included, but the status follows a
    unit's latest scored day: three flags made the unit untrusted on the day, six confirmations the next day made it
    trusted again, and re-running the first day must not turn it stale now."""
    day = today - timedelta(days=2)
    unit_id = note(mem, "Fact", "The build server restarts on Sundays.").unit_id
    backdate(conn, (("memory_units", "created_at"), ("memory_units", "valid_from"), ("memory_changes", "at")),
             "40 days")
    end = decay.day_end(day)
    votes = [(f"F-{i}", -1, end - timedelta(hours=12)) for i in range(3)] + [
        (f"C-{i}", 1, end + timedelta(hours=12)) for i in range(6)]
    for task, vote, at in votes:
        conn.execute("INSERT INTO memory_vote_history (unit_id, project, task_id, vote, at) "
                     "VALUES (%s, 'acme', %s, %s, %s)", (unit_id, task, vote, at))
    decay.score_day(conn, day + timedelta(days=1))
    assert decay.score_day(conn, day)["stale"] == 0
    assert conn.execute("SELECT day, stale FROM decay_scores ORDER BY day").fetchall() == [
        (day, True), (day + timedelta(days=1), False)]
    assert conn.execute("SELECT status FROM memory_units WHERE id = %s", (unit_id,)).fetchone()[0] == "active"


def test_decay_runs_one_day_at_a_time(mem, conn, today):
    """An attacker's pass: an earlier day's marks read whether a later day was scored, which a run of that later day
    not yet committed hid (a backfill beside the daily run), so the unit was marked stale all the same. A day's decay
    waits for any other day's run to end."""
    with psycopg.connect(mem.url, autocommit=True) as other, other.transaction():
        database.hold(other, V.DECAY_LOCK)  # another day's run, under way
        scored: list[dict[str, int]] = []
        waiting = threading.Thread(target=lambda: scored.append(decay.score_day(conn, today)))
        waiting.start()
        waiting.join(timeout=1.0)
        assert waiting.is_alive() and not scored
    waiting.join(timeout=30)
    assert scored and not waiting.is_alive()


def test_ttl_expiry_takes_an_episode_out_of_recall_but_keeps_its_row(mem, conn, embedder, today):
    episode = note(mem, "Deploy incident", "The Friday deploy failed because the cache volume filled up.",
                   type="episodic", valid_from=datetime.now(UTC) - timedelta(days=V.EPISODIC_TTL_DAYS + 5))
    fresh = note(mem, "Deploy incident today", "Today's deploy failed because the cache volume filled up.",
                 type="episodic")
    embed_all(conn, embedder)
    assert {h.token for h in mem.recall("acme", "deploy failed cache volume", k=5)} == {episode.token, fresh.token}
    counts = decay.score_day(conn, today)
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


def test_a_week_of_200_episodes_on_5_topics_consolidates_into_about_5_units(mem, conn, embedder, today):
    rng = np.random.default_rng(3)
    for i in range(200):
        topic = list(TOPICS)[i % 5]
        text = TOPICS[topic][rng.integers(0, 3)].format(f"#{i}")
        mem.remember(project="acme", kind="note", type="episodic", title=text[:80], body=text + ".", task_id=f"T-{i}")
    embed_all(conn, embedder)
    week = today - timedelta(days=today.weekday())
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


def test_private_episodes_are_never_consolidated_into_a_shared_unit(mem, conn, embedder, today):
    for i in range(6):
        mem.remember(project="acme", kind="note", type="episodic", title=f"Ana hummed the tune #{i} while deploying",
                     body=f"Ana hummed the tune #{i} while deploying.", task_id=f"T-{i}", persona="ana",
                     visibility="private")
    embed_all(conn, embedder)
    assert consolidation.consolidate_week(conn, T1, today - timedelta(days=today.weekday()))["clusters"] == 0
    assert conn.execute("SELECT count(*) FROM memory_units WHERE type = 'semantic'").fetchone()[0] == 0


def test_a_configured_summariser_writes_the_consolidated_text(mem, conn, embedder, today):
    for i in range(6):
        mem.remember(project="acme", kind="note", type="episodic", title=f"Flight {i} to Berlin delayed",
                     body=f"Flight #{i} to Berlin for the offsite was delayed by fog.", task_id=f"T-{i}")
    embed_all(conn, embedder)
    week = today - timedelta(days=today.weekday())
    seen = []

    def summarise(texts):
        seen.append(len(texts))
        return "Berlin flights delayed", "Offsite flights to Berlin are often delayed by fog."

    assert consolidation.consolidate_week(conn, T1, week, summarizer=summarise)["clusters"] == 1
    assert seen == [6]
    assert conn.execute("SELECT body FROM memory_units WHERE type = 'semantic'").fetchone()[0].startswith("Offsite")


def test_a_summary_that_is_no_valid_unit_skips_its_cluster_not_the_week_of_every_project(mem, conn, embedder, today):
    """A 256-letter word shared by a project's episodes became a keyword longer than a keyword may be: the summary's
    validation failed and took the whole week down, every project's consolidation and the day's graph after it. So
    did a summariser's body longer than a unit's."""
    long_word = "aardvark" * 32
    for project, extra in (("aaa-victim", ""), ("zzz-evil", f" {long_word}")):
        for i, (title, body) in enumerate(FLIGHTS):
            mem.remember(project=project, kind="note", type="episodic", title=title, body=body + extra,
                         task_id=f"T-{i}")
    embed_all(conn, embedder)
    week = today - timedelta(days=today.weekday())
    counts = consolidation.consolidate_week(conn, T1, week)
    assert (counts["projects"], counts["clusters"], counts["skipped"]) == (2, 2, 0)
    keywords = conn.execute("SELECT keywords FROM memory_units WHERE project = 'zzz-evil' AND type = 'semantic'")
    assert long_word not in keywords.fetchone()[0]

    def rambling(texts):
        return "Berlin flights delayed", "Fog. " * 1000

    counts = consolidation.consolidate_week(conn, T1, week, summarizer=rambling)
    assert (counts["projects"], counts["clusters"]) == (2, 2)  # the body cut to a unit's length

    def invalid(texts):
        return "Berlin\x00flights", "A title no unit may carry."

    counts = consolidation.consolidate_week(conn, T1, week, summarizer=invalid)
    assert (counts["projects"], counts["clusters"], counts["skipped"]) == (2, 0, 2)


# --- Forget reaches derived text (issue #13) -------------------------------------------------

FORGETTER = authz.Actor.for_project("acme", "alice", forget=True)


def live_summaries(conn):
    return conn.execute("SELECT count(*) FROM memory_units WHERE type = 'semantic' AND status IN "
                        "('proposed', 'review', 'active', 'flagged', 'stale')").fetchone()[0]


def test_forgetting_a_member_tombstones_the_weekly_summary_that_copied_it(mem, conn, embedder, stored_text, today):
    week = today - timedelta(days=today.weekday())
    members = flights(mem)
    embed_all(conn, embedder)
    assert consolidation.consolidate_week(conn, T1, week)["clusters"] == 1
    summary_id = conn.execute("SELECT consolidated_unit FROM consolidation_clusters").fetchone()[0]
    title, number = conn.execute("SELECT title, number FROM memory_units WHERE id = %s", (summary_id,)).fetchone()
    summary = f"mem-{number}"
    copied = next(m for m, (t, _) in zip(members, FLIGHTS, strict=True) if t == title)  # the central member
    copied_body = FLIGHTS[members.index(copied)][1]
    embed_all(conn, embedder)
    assert summary in [h.token for h in mem.recall("acme", copied_body, k=7)]  # the copy is recalled
    mem.forget("acme", copied.token, FORGETTER, reason="user asked")
    derived = mem.unit("acme", summary)
    assert (derived["status"], derived["title"], derived["body"]) == ("forgotten", "", "")
    assert conn.execute("SELECT count(*) FROM consolidation_clusters").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM memory_units WHERE consolidated_into IS NOT NULL").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM memory_embeddings WHERE unit_id = %s", (summary_id,)).fetchone()[0] == 0
    assert conn.execute("SELECT details->>'derived_from' FROM audit_log WHERE unit_id = %s AND action = 'forget'",
                        (summary_id,)).fetchone() == (copied.unit_id,)
    hits = [h.token for h in mem.recall("acme", copied_body, k=6)]
    assert copied.token not in hits and summary not in hits and len(hits) == 5
    assert title not in stored_text() and copied_body not in stored_text()
    assert quality.tombstones_with_text(conn) == [] and quality.unlinked_consolidations(conn) == []
    # the next weekly run rebuilds the summary from the members that remain
    assert consolidation.consolidate_week(conn, T1, week)["members"] == 5
    assert live_summaries(conn) == 1 and title not in stored_text()
    assert quality.tombstones_with_text(conn) == [] and quality.unlinked_consolidations(conn) == []


def test_correcting_a_member_retires_the_weekly_summary_that_copied_its_words(mem, conn, embedder, today):
    """A weekly summary copies its members' words; a correction of a member left the summary serving the words it
    replaced (a wrong vendor, a wrong port) until that week was consolidated again, which for a past week might be
    never. The correction retires the summaries built from the member in its own transaction (audited, clusters
    dropped, pointers cleared), and the week's next consolidation rebuilds one from the corrected words."""
    week = today - timedelta(days=today.weekday())
    members = flights(mem)
    embed_all(conn, embedder)
    assert consolidation.consolidate_week(conn, T1, week)["clusters"] == 1
    summary_id, title = conn.execute("SELECT u.id, u.title FROM consolidation_clusters c "
                                     "JOIN memory_units u ON u.id = c.consolidated_unit").fetchone()
    copied = next(m for m, (t, _) in zip(members, FLIGHTS, strict=True) if t == title)
    mem.correct("acme", copied.token, title="Flight to Munich delayed",
                body="The offsite flight to Munich was delayed by fog.")
    assert conn.execute("SELECT status FROM memory_units WHERE id = %s", (summary_id,)).fetchone()[0] == "retired"
    assert live_summaries(conn) == 0
    assert conn.execute("SELECT count(*) FROM consolidation_clusters").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM memory_units WHERE consolidated_into IS NOT NULL").fetchone()[0] == 0
    assert conn.execute("SELECT details->>'corrected' FROM audit_log WHERE unit_id = %s AND action = 'retired'",
                        (summary_id,)).fetchone() == (copied.unit_id,)
    assert quality.unlinked_consolidations(conn) == []
    embed_all(conn, embedder)
    assert consolidation.consolidate_week(conn, T1, week)["clusters"] >= 1  # rebuilt from the words as they are
    assert live_summaries(conn) >= 1 and quality.unlinked_consolidations(conn) == []
    rebuilt = conn.execute("SELECT string_agg(u.title || ' ' || u.body, ' ') FROM consolidation_clusters c "
                           "JOIN memory_units u ON u.id = c.consolidated_unit").fetchone()[0]
    assert title not in rebuilt  # no member holds the replaced title now


def write_until(mem, stop: threading.Event, fact: dict, prefix: str) -> list[str]:
    """remember() the same content under new task ids until told to stop; the statuses, in order."""
    statuses: list[str] = []
    while not stop.is_set():
        statuses.append(mem.remember(**fact, task_id=f"{prefix}-{len(statuses)}").status)
    return statuses


def test_writes_racing_a_forget_of_their_content_leave_no_text_behind(mem, conn):
    """Writers keep sending a unit's content while it is forgotten: no fold runs inside the forget (both hold the
    project's counter row), so every row with that content is blanked or buried, none keeps its text linked to the
    tombstone (every round of 30 did before), and the content is refused afterwards."""
    for attempt in range(5):
        fact = dict(project="acme", kind="env", type="semantic", title=f"Relay {attempt}",
                    body=f"The relay {attempt} comes from Ostwind.")
        gone = mem.remember(**fact, task_id=f"T-{attempt}")
        stop = threading.Event()
        with ThreadPoolExecutor(4) as pool:
            writers = [pool.submit(write_until, mem, stop, fact, f"T-{attempt}-{w}") for w in range(4)]
            time.sleep(0.02)
            mem.forget("acme", gone.token, FORGETTER)
            time.sleep(0.02)
            stop.set()
            statuses = [status for writer in writers for status in writer.result()]
        assert V.OUTCOME_DUPLICATE in statuses and V.OUTCOME_REJECTED in statuses, statuses  # both sides of it
        assert quality.tombstones_with_text(conn) == []
        assert mem.remember(**fact, task_id="after").reason == V.REASON_FORGOTTEN


def fold_day(mem, start: threading.Barrier, day) -> None:
    start.wait()
    with mem.connection() as conn:
        capture.fold(conn, day=day)


def forget_unit(mem, start: threading.Barrier, token: str) -> None:
    start.wait()
    mem.forget("acme", token, FORGETTER)


def test_a_forget_of_a_private_unit_never_deadlocks_the_fold_of_its_content(mem, conn, today):
    """A private unit's audience trigger updates it when a fold links a source, and the forget updates it and the
    inbox rows: with the fold holding the counter row first and the forget waiting for it first, neither holds
    what the other waits for (the daily fold died in a deadlock 56 times in 60 before)."""
    for attempt in range(8):
        fact = dict(project="acme", kind="env", type="semantic", title=f"Relay {attempt}",
                    body=f"The relay {attempt} comes from Ostwind.", visibility="private")
        gone = mem.remember(**fact, task_id=f"T-{attempt}", persona="ann")
        mem.remember_many([gates.validate(**fact, task_id=f"T-{attempt}-{i}", persona="bob") for i in range(40)],
                          fold_now=False)
        start = threading.Barrier(2)
        with ThreadPoolExecutor(2) as pool:
            racing = [pool.submit(fold_day, mem, start, today), pool.submit(forget_unit, mem, start, gone.token)]
            for done in racing:
                done.result()  # a DeadlockDetected surfaces here
        assert quality.tombstones_with_text(conn) == []
        assert conn.execute("SELECT count(*) FROM memory_inbox WHERE unit_id IS NULL").fetchone()[0] == 0


def test_a_member_forgotten_while_the_week_consolidates_never_reaches_a_summary(mem, conn, embedder, today):
    week = today - timedelta(days=today.weekday())
    members = flights(mem)
    embed_all(conn, embedder)
    seen = []

    def summarise(texts):  # runs after the week's episodes were read: forget one of them right now
        seen.append(len(texts))
        mem.forget("acme", members[0].token, FORGETTER)
        return "Berlin flights delayed", "Offsite flights to Berlin are often delayed by fog."

    counts = consolidation.consolidate_week(conn, T1, week, summarizer=summarise)
    assert seen == [6] and counts["clusters"] == 0 and live_summaries(conn) == 0
    assert consolidation.consolidate_week(conn, T1, week, summarizer=lambda texts: (
        "Berlin flights delayed", f"{len(texts)} offsite flights to Berlin were delayed by fog."))["members"] == 5
    assert quality.tombstones_with_text(conn) == []


def test_the_migration_repairs_what_forgets_before_the_fix_left_behind(mem, conn, embedder, stored_text, today):
    week = today - timedelta(days=today.weekday())
    members = flights(mem)
    dup = note(mem, "Berlin flights are late", "Flights to Berlin for the offsite are late in fog.", task_id="T-9")
    embed_all(conn, embedder)
    consolidation.consolidate_week(conn, T1, week)
    summary_id, title, number = conn.execute(
        "SELECT c.consolidated_unit, u.title, u.number FROM consolidation_clusters c "
        "JOIN memory_units u ON u.id = c.consolidated_unit").fetchone()
    assert f"mem-{number}" in [u["id"] for u in mem.compile_bundle("acme")["units"]]
    copied = next(m for m, (t, _) in zip(members, FLIGHTS, strict=True) if t == title)
    # what a forget did before: the unit and its inbox rows blanked, nothing derived from it touched
    conn.execute("UPDATE memory_units SET status = 'forgotten', title = '', body = '', paths = '{}', keywords = '{}' "
                 "WHERE id = %s", (copied.unit_id,))
    conn.execute("UPDATE memory_inbox SET title = '', body = '' WHERE unit_id = %s", (copied.unit_id,))
    conn.execute("INSERT INTO audit_log (actor, action, project, unit_id) VALUES ('alice', 'forget', 'acme', %s)",
                 (copied.unit_id,))
    conn.execute("UPDATE memory_units SET status = 'retired', duplicate_of = %s WHERE id = %s",
                 (copied.unit_id, dup.unit_id))
    assert quality.tombstone_leaks(conn) == {copied.unit_id: ["member pointer", "merged duplicate", "summary"]}
    migration = (REPO / "sql" / "010_forget_derived.sql").read_text()
    conn.execute(migration)
    assert quality.tombstones_with_text(conn) == [] and quality.unlinked_consolidations(conn) == []
    statuses = dict(conn.execute("SELECT id::text, status FROM memory_units WHERE id IN (%s, %s)",
                                 (summary_id, dup.unit_id)).fetchall())
    assert statuses == {str(summary_id): "forgotten", dup.unit_id: "forgotten"}
    assert title not in stored_text() and "late in fog" not in stored_text()
    audited = conn.execute("SELECT count(*) FROM audit_log").fetchone()[0]
    conn.execute(migration)  # idempotent: a clean ledger is left as it is
    assert conn.execute("SELECT count(*) FROM audit_log").fetchone()[0] == audited


PLANTS = {
    "unit": "UPDATE memory_units SET body = 'planted text' WHERE id = %(gone)s",
    "unit keywords": "UPDATE memory_units SET keywords = '{planted}' WHERE id = %(gone)s",
    "inbox": "UPDATE memory_inbox SET body = 'planted text' WHERE unit_id = %(gone)s",
    "unfolded inbox": "UPDATE memory_inbox SET body = 'planted text', unit_id = NULL, outcome = NULL, "
                      "folded_at = NULL, received_at = received_at - interval '1 hour' WHERE unit_id = %(gone)s",
    "bundle": "INSERT INTO memory_bundles (project, revision, content_hash, bundle, bytes, units) "
              "VALUES ('acme', 99, 'x', jsonb_build_object('v', 1, 'project', 'acme', 'revision', 99, 'units', "
              "jsonb_build_array(jsonb_build_object('id', 'mem-2', 'title', 'planted text'))), 1, 1)",
    "vector": "INSERT INTO memory_embeddings (unit_id, project, model_key, unit_revision, content_hash, text_digest, "
              "model_name, model_revision, dim, embedding) SELECT %(gone)s, project, model_key, unit_revision, "
              "content_hash, text_digest, model_name, model_revision, dim, embedding FROM memory_embeddings "
              "WHERE unit_id = %(kept)s",
    "consolidation": "INSERT INTO consolidation_clusters (week_start, project, cluster, consolidated_unit, members) "
                     "VALUES (current_date, 'acme', 0, %(kept)s, ARRAY[%(gone)s]::uuid[])",
    "consolidated_into": "UPDATE memory_units SET consolidated_into = %(kept)s WHERE id = %(gone)s",
    "merged duplicate": "UPDATE memory_units SET status = 'retired', duplicate_of = %(gone)s WHERE id = %(kept)s",
    # a tombstone written with triggers off: remember() would skip the forgotten-content probe in its project
    "unguarded project": "UPDATE memory_projects SET holds_forgotten = false WHERE project = 'acme'",
}


@pytest.mark.parametrize("place", PLANTS)
def test_the_tombstone_check_sees_text_in_every_place(mem, conn, embedder, place):
    kept = note(mem, "Kept fact", "The cafeteria opens at noon on Fridays.", task_id="T-0")
    gone = note(mem, task_id="T-1", **SECRET_FACT)
    embed_all(conn, embedder)
    mem.forget("acme", gone.token, FORGETTER)
    assert quality.tombstones_with_text(conn) == []
    conn.execute(PLANTS[place], {"gone": gone.unit_id, "kept": kept.unit_id})
    assert quality.tombstones_with_text(conn) == [gone.unit_id]
    from memory_assets.defs.lifecycle.checks import no_text_in_tombstones
    from memory_assets.resources import PostgresResource

    result = no_text_in_tombstones(postgres=PostgresResource(database_url=mem.url))
    assert not result.passed and result.metadata["unit_ids"].value == [gone.unit_id]


# --- Consolidation is deterministic (issue #13) ----------------------------------------------

EXTRACT = """
import json, sys
import numpy as np
from memory_assets import consolidation
rows = [(i, i + 1, "note", f"Flight {i} to Berlin delayed", f"Flight #{i} to Berlin for the offsite was delayed by fog "
         f"after the airport strike and the storm warning", [], None) for i in range(8)]
vectors = np.array([[1.0, 0.1 * (i % 3), 0.0] for i in range(8)])
print(json.dumps(consolidation.extract(rows, list(range(8)), vectors)))
"""

CONSOLIDATE = """
import sys
import psycopg
from datetime import date
from pgvector.psycopg import register_vector
from memory_assets import consolidation
from memory_assets.database import connection_kwargs
with psycopg.connect(sys.argv[1], **connection_kwargs()) as conn:
    register_vector(conn)
    print(consolidation.consolidate_week(conn, sys.argv[2], date.fromisoformat(sys.argv[3])))
"""


def run_python(script, seed, *args):
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_keyword_extraction_is_the_same_under_every_hash_seed():
    outputs = {run_python(EXTRACT, seed) for seed in (1, 2, 3, 4)}
    assert len(outputs) == 1, outputs
    keywords = json.loads(outputs.pop())[2]
    assert keywords == sorted(keywords) and len(keywords) == V.CONSOLIDATION_KEYWORDS  # all tie: alphabetical


def test_extraction_ignores_the_order_of_members():
    rows = [(i, i + 1, "note", f"Episode {i} about the cache", f"The cache volume {i} filled up during the deploy",
             [], None) for i in range(6)]
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    outputs = {json.dumps(consolidation.extract(rows, order, vectors))
               for order in ([0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], [3, 1, 4, 0, 5, 2])}
    assert len(outputs) == 1, outputs  # a tie for the most central member goes to the lowest unit number
    assert json.loads(outputs.pop())[0] == "Episode 0 about the cache"


def test_three_reruns_under_other_hash_seeds_keep_one_live_summary_per_cluster(mem, conn, embedder, today):
    week = today - timedelta(days=today.weekday())
    flights(mem)
    embed_all(conn, embedder)
    for seed in (1, 2, 1):
        assert "'clusters': 1" in run_python(CONSOLIDATE, seed, mem.url, T1, week.isoformat())
        assert live_summaries(conn) == 1
    assert conn.execute("SELECT count(*) FROM memory_units WHERE type = 'semantic'").fetchone()[0] == 1
    assert quality.unlinked_consolidations(conn) == []


def test_a_rerun_never_retires_the_summary_it_recreates(mem, conn, embedder, today):
    """A summariser may answer differently on each run (an LLM does): the week keeps exactly one live summary."""
    week = today - timedelta(days=today.weekday())
    flights(mem)
    embed_all(conn, embedder)
    answers = iter(["Flights to Berlin are delayed by fog.", "Fog delays the offsite flights to Berlin."] * 2)
    summaries = []
    for _ in range(4):
        consolidation.consolidate_week(conn, T1, week, summarizer=lambda texts: ("Berlin flights", next(answers)))
        assert live_summaries(conn) == 1
        summaries.append(conn.execute("SELECT consolidated_unit FROM consolidation_clusters").fetchone()[0])
    assert summaries[0] == summaries[2] and summaries[1] == summaries[3] and summaries[0] != summaries[1]
    assert quality.unlinked_consolidations(conn) == [] and quality.duplicate_live_units(conn) == []


def test_a_supersession_holding_its_units_never_blocks_the_days_decay_scores(mem, conn, clean):
    """A supersession locks its two units as an update of theirs would (FOR NO KEY UPDATE): decay's insert of the
    day's scores checks each unit's key meanwhile instead of waiting (FOR UPDATE held those checks off, in an order
    of decay's own: the deadlock a merge's lock had with it)."""
    from memory_assets import decay, lifecycle

    old = note(mem, "Relay vendor", "The relay is bought from Ostwind GmbH.", task_id="T-1")
    new = note(mem, "Relay vendor now", "The relay is bought from Nordwind AG.", task_id="T-2")
    with conn.transaction():
        lifecycle.supersede(conn, new.unit_id, old.unit_id)
        with psycopg.connect(clean) as scorer:
            scorer.execute("SET lock_timeout = '3s'")
            assert decay.score_day(scorer, datetime.now(UTC).date())["scored"] >= 2
