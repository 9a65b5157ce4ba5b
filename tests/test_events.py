"""Usage events and the memory switch: one row per (task, unit, kind), citations, task -> epic -> holdout ->
default, and a kill switch that stops everything."""

import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from bench.recall_stages import round_trips
from memory_assets import authz, database, events, gates
from memory_assets import vocabulary as V
from memory_assets.errors import ValidationError
from memory_assets.ledger import capture


def test_fifty_concurrent_identical_events_make_one_row(mem, conn):
    token = mem.remember(project="acme", kind="env", type="semantic", title="Fact",
                         body="The cache is warmed at 06:00 because traffic peaks at 07:00.").token
    barrier = threading.Barrier(50)

    def record(_):
        barrier.wait()
        return mem.record_events("acme", "T-1", [{"token": token, "kind": "read", "channel": "tool"}])

    with ThreadPoolExecutor(50) as pool:
        assert sum(pool.map(record, range(50))) == 1
    assert conn.execute("SELECT count(*) FROM memory_events").fetchone()[0] == 1
    assert mem.unit("acme", token)["last_used_at"] is not None


def test_an_output_citing_nothing_asks_the_server_nothing(conn):
    """Most agent outputs cite no token: no lookup by an empty list (a constant false, which the planner may take to
    read a partial index whole), no events, and a bad task id is still refused."""
    assert round_trips(conn, lambda: events.cite_from_text(conn, "acme", "T-1", "no tokens here")) == (0, 0)
    assert events.cite_from_text(conn, "acme", "T-1", "") == []
    with pytest.raises(ValidationError):
        events.cite_from_text(conn, "acme", "", "no tokens here")


def test_an_output_past_the_citation_limits_is_refused_naming_them(conn):
    """Regression (an attacker's pass): 95 MB of "mem-1 mem-2 …" took 27 s and 2.4 GB, every number sent to SQL."""
    with pytest.raises(ValidationError, match=rf"^text: at most {V.CITE_TEXT_MAX_CHARS} characters"):
        events.cite_from_text(conn, "acme", "T-1", "x" * (V.CITE_TEXT_MAX_CHARS + 1))
    too_many = " ".join(f"mem-{n}" for n in range(1, V.CITE_MAX_TOKENS + 2))
    with pytest.raises(ValidationError, match=rf"^text: cites at most {V.CITE_MAX_TOKENS} distinct tokens"):
        events.cite_from_text(conn, "acme", "T-1", too_many)
    assert events.cite_from_text(conn, "acme", "T-1", too_many.rsplit(" ", 1)[0] + " mem-1") == []  # none exist


def test_a_citation_of_another_projects_token_records_nothing(mem, conn):
    mem.remember(project="other", kind="env", type="semantic", title="Other fact",
                 body="The other project deploys on Fridays because of its customers.")
    ours = mem.remember(project="acme", kind="env", type="semantic", title="Our fact",
                        body="We deploy on Mondays because the team is complete then.").token
    assert mem.cite_from_text("acme", "T-1", "As mem-99 and mem-1 say… (also mem-1)") == [ours]
    assert mem.cite_from_text("acme", "T-2", "see mem-2") == []  # mem-2 does not exist in acme
    mem.remember(project="other", kind="env", type="semantic", title="Other fact 2",
                 body="The other project freezes deploys in December because of the holidays.")
    assert mem.cite_from_text("acme", "T-3", "per mem-2 of the other project") == []
    rows = conn.execute("SELECT project, kind FROM memory_events").fetchall()
    assert rows == [("acme", "cited")]


def test_an_event_reaches_a_private_unit_only_as_its_persona(mem, conn):
    """An event stamps a unit's last use, which keeps it alive in decay: anyone in the project could cite or record a
    read on a unit private to another persona by its token. Events read units as recall does."""
    hers = mem.remember(project="acme", kind="env", type="semantic", title="Ana's login", persona="ana",
                        visibility="private", body="Ana logs in to staging through the bastion host.").token
    shared = mem.remember(project="acme", kind="env", type="semantic", title="Deploy day",
                          body="We deploy on Mondays because the team is complete then.").token
    text = f"as {hers} and {shared} say"
    for persona in (None, "bo"):
        assert mem.cite_from_text("acme", "T-1", text, persona=persona) == [shared]
        assert mem.record_events("acme", f"T-{persona}", [{"token": hers, "kind": "read"}], persona=persona) == 0
    assert conn.execute("SELECT count(*) FROM memory_events e JOIN memory_units u ON u.id = e.unit_id "
                        "WHERE u.number = %s", (int(hers[4:]),)).fetchone()[0] == 0
    assert conn.execute("SELECT last_used_at FROM memory_units WHERE number = %s",
                        (int(hers[4:]),)).fetchone()[0] is None
    assert mem.cite_from_text("acme", "T-2", text, persona="ana") == [hers, shared]
    assert mem.record_events("acme", "T-2", [{"token": hers, "kind": "read"}], persona="ana") == 1
    with pytest.raises(ValidationError, match=r"^persona: "):
        mem.cite_from_text("acme", "T-3", text, persona="ana bo")
    # a prompt block records its injections as its reader: her block reaches her unit
    ana = authz.Actor.reader("acme", "ana")
    assert hers in mem.prompt_block("acme", query="staging bastion login", task_id="T-4", actor=ana)
    assert conn.execute("SELECT count(*) FROM memory_events e JOIN memory_units u ON u.id = e.unit_id "
                        "WHERE e.task_id = 'T-4' AND e.kind = 'injected' AND u.number = %s",
                        (int(hers[4:]),)).fetchone()[0] == 1


TASK, EPIC, DEFAULT = ("on", "off", None), ("on", "off", None, "no-epic"), ("on", "off")


@pytest.mark.parametrize("task,epic,default", list(itertools.product(TASK, EPIC, DEFAULT)))
def test_the_24_switch_combinations_resolve_task_then_epic_then_default(task, epic, default):
    settings = {("system", ""): default}
    if task:
        settings[("task", "T-1")] = task
    epic_id = None if epic == "no-epic" else "E-1"
    if epic in ("on", "off"):
        settings[("epic", "E-1")] = epic
    value, source = events.resolve(settings, "T-1", epic_id)
    if task:
        assert (value, source) == (task, "task")
    elif epic in ("on", "off"):
        assert (value, source) == (epic, "epic")
    else:
        assert (value, source) == (default, "default")


def test_kill_switch_and_holdout(mem, conn):
    settings = {("system", ""): "on", ("task", "T-1"): "on", ("kill", ""): "on"}
    assert events.resolve(settings, "T-1", "E-1") == ("off", "killed")
    held = [f"E-{i}" for i in range(400) if events.holdout_bucket(f"E-{i}") < 25]
    assert 60 <= len(held) <= 140  # about a quarter of the epics
    settings = {("system", ""): "on", ("holdout", ""): "25"}
    assert events.resolve(settings, "T-9", held[0]) == ("off", "holdout")
    assert all(events.resolve(settings, f"T-{i}", held[0]) == ("off", "holdout") for i in range(5))  # stable per epic
    # recorded per task, and an off task gets an empty block and records nothing
    mem.remember(project="acme", kind="env", type="semantic", title="Fact",
                 body="The cache is warmed at 06:00 because traffic peaks at 07:00.")
    mem.set_switch("task", "T-off", "off")
    assert mem.prompt_block("acme", task_id="T-off") == ""
    assert events.arm_of(conn, "T-off")["source"] == "task"
    assert conn.execute("SELECT count(*) FROM memory_events").fetchone()[0] == 0
    assert mem.prompt_block("acme", task_id="T-on").startswith("<memories>")
    assert conn.execute("SELECT task_id, kind FROM memory_events").fetchall() == [("T-on", "injected")]


def test_explicit_task_and_epic_settings_outrank_the_holdout():
    """The switch order is task -> epic -> holdout -> default: the holdout only assigns tasks nobody decided for."""
    held = next(f"E-{i}" for i in range(400) if events.holdout_bucket(f"E-{i}") < 50)
    holdout = {("system", ""): "on", ("holdout", ""): "50"}
    assert events.resolve(holdout, "T-1", held) == ("off", "holdout")
    assert events.resolve({**holdout, ("task", "T-1"): "on"}, "T-1", held) == ("on", "task")
    assert events.resolve({**holdout, ("epic", held): "on"}, "T-1", held) == ("on", "epic")
    assert events.resolve({**holdout, ("task", "T-1"): "on", ("kill", ""): "on"}, "T-1", held) == ("off", "killed")
    unheld = next(f"E-{i}" for i in range(400) if events.holdout_bucket(f"E-{i}") >= 50)
    assert events.resolve(holdout, "T-1", unheld) == ("on", "default")


@pytest.mark.parametrize("share", ["50.5", "60", "100", "-1", "nan", "inf", "half", ""])
def test_a_holdout_share_outside_0_to_50_percent_is_refused_naming_the_field(mem, conn, share):
    with pytest.raises(ValidationError) as refused:
        mem.set_switch("holdout", "", share)
    assert refused.value.field == "holdout"
    assert conn.execute("SELECT count(*) FROM memory_switch").fetchone()[0] == 0


def test_holdout_shares_from_0_to_50_percent_are_kept_and_unknown_scopes_refused(mem, conn):
    for share in ("0", "12.5", "50"):
        mem.set_switch("holdout", "", share)
        assert conn.execute("SELECT value FROM memory_switch WHERE scope = 'holdout'").fetchone()[0] == share
    with pytest.raises(ValidationError, match=r"^scope: "):
        mem.set_switch("team", "T", "on")


def test_the_kill_switch_stops_every_write_block_and_event(mem, conn):
    """Kill on: remember stores nothing (status "off"), no prompt block with or without a task, no citation, no
    event, no recall hit; kill off again and everything works as before."""
    fact = dict(project="acme", kind="env", type="semantic", title="Cache warm-up",
                body="The cache is warmed at 06:00 because traffic peaks at 07:00.")
    token = mem.remember(**fact).token
    mem.compile_bundle("acme")
    waiting = mem.remember_many([gates.validate(**{**fact, "title": "Waits"})], fold_now=False)["to_fold"]
    before = {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
              for table in ("memory_inbox", "memory_units", "memory_sources", "memory_rejections", "audit_log",
                            "memory_events", "memory_task_arms", "memory_task_arm_history", "memory_votes",
                            "memory_vote_history")}
    mem.set_switch("kill", "", "on")

    off = mem.remember(**{**fact, "title": "Cache warm-up time", "body": "The cache warms at 05:30 since 2025."})
    assert (off.status, off.token, off.unit_id, off.reason) == ("off", None, None, "killed")
    assert mem.remember(**{**fact, "body": "password=" + "Tr0ub4dor-and-3"}).status == "off"  # not even counted
    assert mem.remember(**{**fact, "body": "The cache warms at 05:00."}, supersedes=token).status == "off"
    assert mem.remember_many([gates.validate(**{**fact, "title": "Another"})]) == {
        "captured": 0, "inserted": 0, "rejected": {}, "to_fold": [], "refused": {}, "off": True}
    assert mem.fold_captured(waiting) == {"inserted": 0, "refused": {}, "off": True}  # left to the ledger's fold
    assert mem.prompt_block("acme") == ""
    assert mem.prompt_block("acme", query="cache warm-up") == ""
    assert mem.prompt_block("acme", task_id="T-1") == ""
    assert mem.bundle("acme") == {"v": 1, "project": "acme", "units": [], "off": True}  # what agents read: none
    assert mem.cite_from_text("acme", "T-1", f"as {token} says") == []
    assert mem.record_events("acme", "T-1", [{"token": token, "kind": "read"}]) == 0
    # votes too (they counted under the kill switch before: a review's finding)
    assert mem.confirm("acme", token, task_id="T-1") == {"token": token, "off": True}
    assert mem.flag("acme", token, task_id="T-2") == {"token": token, "off": True}
    recalled = mem.recall("acme", "cache warm-up")
    assert (recalled.hits, recalled.mode) == ([], "off")
    with pytest.raises(ValidationError, match=r"^k: "):  # bad input is still bad input
        mem.recall("acme", "cache", k=0)
    after = {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in before}
    assert after == before  # not even the task's arm: the block was never asked for
    assert mem.effective_memory("T-1") == {"task_id": "T-1", "epic_id": None, "value": "off", "source": "killed"}

    mem.set_switch("kill", "", "off")
    assert mem.prompt_block("acme").startswith("<memories>")
    assert [u["id"] for u in mem.bundle("acme")["units"]] == [token]
    assert mem.cite_from_text("acme", "T-1", f"as {token} says") == [token]
    assert [h.token for h in mem.recall("acme", "cache warm-up")] == [token]


STORED = ("SELECT (SELECT count(*) FROM memory_inbox), (SELECT count(*) FROM memory_units), "
          "(SELECT count(*) FROM memory_votes), (SELECT count(*) FROM memory_events), "
          "(SELECT coalesce(sum(count), 0) FROM memory_rejections)")
WAITING = "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = %s"
CACHE = dict(project="acme", kind="env", type="semantic", title="Cache warm-up",
             body="The cache is warmed at 06:00 because traffic peaks at 07:00.")


def held_write(mem, token):
    """Each write path: the row another session locks so that the write waits after reading the kill switch, and
    the write itself."""
    unit = "SELECT 1 FROM memory_units WHERE project = 'acme' FOR UPDATE"
    counter = "SELECT 1 FROM memory_projects WHERE project = 'acme' FOR UPDATE"
    return {
        "remember": (counter, lambda: mem.remember(**{**CACHE, "title": "Peak", "body": "Traffic peaks at 07:00."})),
        "supersede": (counter, lambda: mem.remember(**{**CACHE, "body": "The cache is warmed at 05:00."},
                                                    supersedes=token)),
        "remember_many": (counter, lambda: mem.remember_many([gates.validate(**{**CACHE, "title": "Peak",
                                                                                   "body": "Traffic peaks at 7."})])),
        "vote": (unit, lambda: mem.confirm("acme", token, task_id="T-1")),
        "event": (unit, lambda: mem.record_events("acme", "T-1", [{"token": token, "kind": "read"}])),
        "rejection": ("SELECT 1 FROM memory_rejections FOR UPDATE",
                      lambda: mem.remember(**{**CACHE, "body": "password=" + "Tr0ub4dor-and-3"})),
    }


def waiting_for(conn, locktype: str) -> None:
    """Until some session waits for a lock of this type."""
    for _ in range(200):
        if conn.execute(WAITING, (locktype,)).fetchone()[0]:
            return
        time.sleep(0.02)
    raise AssertionError(f"no session waits for a {locktype} lock")


def said_off(result) -> bool:
    """Whether a write path answered that memory is off: each says so its own way."""
    if isinstance(result, dict):
        return result.get("off") is True
    return result == 0 if isinstance(result, int) else result.status == "off"


@pytest.mark.parametrize("path", ["remember", "supersede", "remember_many", "vote", "event", "rejection"])
def test_a_write_in_flight_as_the_kill_switch_goes_on_stores_nothing_and_set_switch_waits_for_none(mem, conn, clean,
                                                                                                 path):
    """A write that read the switch off just before it went on used to commit after set_switch returned: an
    import's batch up to ~0.2 s later, and one waiting on an operator's row lock whenever that lock went. Each write
    reads the switch again under its lock as its last statement, after every wait: set_switch waits for no write
    still at work, and one that waited while the switch went on stores and counts nothing."""
    token = mem.remember(**CACHE).token
    mem.remember(**{**CACHE, "body": "password=" + "Tr0ub4dor-and-3"})  # the rejections' counter row exists
    lock, write = held_write(mem, token)[path]
    before = conn.execute(STORED).fetchone()
    with psycopg.connect(clean) as blocker, ThreadPoolExecutor(1) as pool:
        with blocker.transaction():
            blocker.execute(lock)
            writing = pool.submit(write)
            waiting_for(conn, "transactionid")
            mem.set_switch("kill", "", "on")  # returns at once: the write in flight holds no lock of the switch
            assert not writing.done()
        assert said_off(writing.result(timeout=30))
    assert conn.execute(STORED).fetchone() == before
    assert mem.remember(**{**CACHE, "title": "After", "body": "Traffic peaks at 08:00."}).status == "off"


COMMITTING = "SELECT pg_advisory_xact_lock_shared(%s, %s)"  # a write between its last read of the switch and commit


def test_a_write_stuck_in_its_commit_makes_set_switch_say_so_after_the_drain_bound_with_the_switch_on(
        mem, conn, clean, monkeypatch):
    """An emergency switch never hangs behind a stuck write: past KILL_SWITCH_DRAIN_MS it raises, the switch on."""
    monkeypatch.setattr(V, "KILL_SWITCH_DRAIN_MS", 200)
    with psycopg.connect(clean) as committing, committing.transaction():
        committing.execute(COMMITTING, V.KILL_SWITCH_LOCK)
        with pytest.raises(TimeoutError, match=r"kill switch is on.*200 ms"):
            mem.set_switch("kill", "", "on")
        assert mem.remember(**{**CACHE, "title": "After", "body": "Traffic peaks at 08:00."}).status == "off"


def test_writes_that_begin_while_set_switch_waits_for_one_committing_are_off_at_once(mem, conn, clean):
    """Turning the switch on waits for a write that is committing, but no other write waits with it: each stores
    nothing and says off at once, so no pooled connection is held through the drain (an attacker's pass: behind a
    write stuck on an operator's lock, every write queued and the pool ran dry)."""
    token = mem.remember(**CACHE).token
    before = conn.execute(STORED).fetchone()
    with psycopg.connect(clean) as committing, ThreadPoolExecutor(1) as pool:
        with committing.transaction():
            committing.execute(COMMITTING, V.KILL_SWITCH_LOCK)
            switching = pool.submit(mem.set_switch, "kill", "", "on")
            waiting_for(conn, "advisory")
            started = time.monotonic()
            assert mem.remember(**{**CACHE, "title": "Peak", "body": "Traffic peaks at 07:00."}).status == "off"
            assert mem.remember_many([gates.validate(**{**CACHE, "title": "Peak", "body": "Peaks at 7."})])["off"]
            assert mem.record_events("acme", "T-2", [{"token": token, "kind": "read"}]) == 0
            assert mem.flag("acme", token, task_id="T-3") == {"token": token, "off": True}
            assert time.monotonic() - started < 5 and not switching.done()  # none waited for the drain
        switching.result(timeout=30)
    assert conn.execute(STORED).fetchone() == before


def test_no_name_an_agent_picks_shares_the_switchs_lock_and_a_hand_held_one_fails_the_drain_not_the_writes(
        mem, conn, clean, monkeypatch):
    """Regression (an attacker's pass): the switch's lock was hashtext('memory_switch:kill'), which the bundle lock of
    a project named kmr7ktdb hashes to, so compiling its bundle took the switch's lock and every write said off. It
    has two keys now, apart from every one-key lock; and a session holding it by hand (the analysts' role may) makes
    set_switch's drain raise, never a write read the switch as on."""
    assert conn.execute("SELECT hashtext('bundle:kmr7ktdb') = hashtext('memory_switch:kill')").fetchone()[0]
    token = mem.remember(**{**CACHE, "project": "kmr7ktdb"}).token
    with psycopg.connect(clean) as compiling, compiling.transaction():
        database.hold(compiling, V.BUNDLE_LOCK.format(project="kmr7ktdb"))  # as a bundle compile holds it
        assert mem.remember(**{**CACHE, "title": "Peak", "body": "Traffic peaks at 07:00."}).status == "active"
        assert mem.record_events("kmr7ktdb", "T-1", [{"token": token, "kind": "read"}]) == 1
    monkeypatch.setattr(V, "KILL_SWITCH_DRAIN_MS", 200)
    with psycopg.connect(clean) as by_hand, by_hand.transaction():
        by_hand.execute("SELECT pg_advisory_xact_lock(%s, %s)", V.KILL_SWITCH_LOCK)
        assert mem.remember(**{**CACHE, "title": "Noon", "body": "Traffic dips at noon."}).status == "active"
        with pytest.raises(TimeoutError, match="holding its lock by hand"):
            mem.set_switch("kill", "", "on")
        assert mem.remember(**{**CACHE, "title": "Dusk", "body": "Traffic falls at dusk."}).status == "off"


def test_the_kill_switch_is_set_under_its_one_key_on_an_autocommit_connection_outside_any_transaction(conn, clean):
    """set_switch('kill', 'all', 'on') was stored and drained while writes read the key '' alone: a key is refused
    for the scopes that have one setting; and on a connection in a transaction the drain would run before the
    switch's commit (a TimeoutError saying it is on while the rollback put it off): refused too."""
    for scope, value in (("kill", "on"), ("system", "off"), ("holdout", "10")):
        with pytest.raises(ValidationError, match=r"^key: must be empty"):
            events.set_switch(conn, scope, "all", value)
    with psycopg.connect(clean) as in_transaction, pytest.raises(RuntimeError, match="outside any transaction"):
        events.set_switch(in_transaction, "kill", "", "on")
    assert conn.execute("SELECT count(*) FROM memory_switch").fetchone()[0] == 0


def test_a_supersession_that_waits_on_the_old_units_row_as_the_switch_goes_on_stores_nothing(mem, conn, clean):
    """Regression (an attacker's pass): a supersession waits on the old unit's row (a vote, a forget) after its
    one-statement write last read the switch, so it committed after the switch went on: it reads the switch again
    once that wait is over, and the drain waits for it."""
    token = mem.remember(**CACHE).token
    before = conn.execute(STORED).fetchone()
    with psycopg.connect(clean) as blocker, ThreadPoolExecutor(2) as pool:
        with blocker.transaction():
            blocker.execute("SELECT 1 FROM memory_units WHERE project = 'acme' AND number = 1 FOR UPDATE")
            writing = pool.submit(mem.remember, **{**CACHE, "body": "The cache is warmed at 05:00."},
                                  supersedes=token)
            waiting_for(conn, "transactionid")
            switching = pool.submit(mem.set_switch, "kill", "", "on")
            waiting_for(conn, "advisory")  # it holds the switch's lock since its write's last read
        assert writing.result(timeout=30).status == "off"
        switching.result(timeout=30)
    assert conn.execute(STORED).fetchone() == before
    assert conn.execute("SELECT status FROM memory_units WHERE number = 1").fetchone()[0] == "active"


def test_a_write_the_switch_stops_inside_a_callers_transaction_rolls_back_alone(mem, conn, clean):
    """Regression (an attacker's pass): a weekly summary writes through capture.remember inside its project's
    transaction; the switch's error at the write's end aborted that transaction, and the next summary failed on it.
    The write runs in a savepoint there: it alone rolls back, off, and the caller's transaction goes on."""
    mem.remember(**CACHE)
    with psycopg.connect(clean, **database.connection_kwargs()) as caller, \
            psycopg.connect(clean) as blocker, ThreadPoolExecutor(1) as pool:
        def summary():
            with caller.transaction():
                caller.execute("SELECT 1")  # the caller's work before the write
                result = capture.remember(caller, gates.validate(**{**CACHE, "title": "Peak",
                                                                    "body": "Traffic peaks at 07:00."}))
                return result.status, caller.execute("SELECT 2").fetchone()[0]

        with blocker.transaction():
            blocker.execute("SELECT 1 FROM memory_projects WHERE project = 'acme' FOR UPDATE")
            writing = pool.submit(summary)
            waiting_for(conn, "transactionid")
            mem.set_switch("kill", "", "on")
        assert writing.result(timeout=30) == ("off", 2)
    assert conn.execute("SELECT count(*) FROM memory_units").fetchone()[0] == 1


def test_citations_the_switch_stops_as_they_are_recorded_are_none(mem, conn, clean):
    """Regression (an attacker's pass): the switch going on while cite_from_text recorded its events left none
    recorded but returned the tokens; it returns [] as it does under a switch on before the call."""
    token = mem.remember(**CACHE).token
    with psycopg.connect(clean) as blocker, ThreadPoolExecutor(1) as pool:
        with blocker.transaction():
            blocker.execute("SELECT 1 FROM memory_units WHERE project = 'acme' FOR UPDATE")
            citing = pool.submit(mem.cite_from_text, "acme", "T-1", f"as {token} says")
            waiting_for(conn, "transactionid")
            mem.set_switch("kill", "", "on")
        assert citing.result(timeout=30) == []
    assert conn.execute("SELECT count(*) FROM memory_events").fetchone()[0] == 0
