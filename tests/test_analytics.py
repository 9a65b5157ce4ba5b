"""Read-rate metrics (the kill metric), the kill list, the analysts' read-only connection, and the arm comparison
(interval maths and the too-few rule without a database, the per-arm counts with one)."""

import random
from datetime import UTC, date, datetime, time, timedelta

import pandas as pd
import psycopg
import pytest

from memory_assets import analytics
from memory_assets import vocabulary as V
from memory_assets.errors import ValidationError
from tests.cases import backdate

TASK, EPIC, DEFAULT = ("on", "off", None), ("on", "off", None, "no-epic"), ("on", "off")


def test_read_rate_metrics_and_kill_list(mem, conn, today):
    token = mem.remember(project="acme", kind="env", type="semantic", title="Fact",
                         body="The cache is warmed at 06:00 because traffic peaks at 07:00.").token
    ignored = mem.remember(project="acme", kind="env", type="semantic", title="Ignored fact",
                           body="The lobby plant is watered on Tuesdays because it is a cactus.").token
    for i in range(6):
        mem.record_events("acme", f"T-{i}", [{"token": token, "kind": "injected"},
                                             {"token": ignored, "kind": "injected"}])
        if i % 2 == 0:
            mem.record_events("acme", f"T-{i}", [{"token": token, "kind": "read"}])
    assert analytics.compute_read_rate(conn, today) == 2
    rates = dict(conn.execute("SELECT 'mem-' || u.number, m.read_rate FROM read_rate_metrics m "
                              "JOIN memory_units u ON u.id = m.unit_id").fetchall())
    assert rates == {token: 0.5, ignored: 0.0}
    assert analytics.kill_list(conn)["token"].tolist() == [ignored]
    assert analytics.compute_read_rate(conn, today) == 2  # re-running a day replaces its rows


def test_a_task_counts_in_its_arm_at_the_days_end_and_a_rerun_after_its_arm_changed_is_identical(mem, conn, today):
    """Invariant 5 for the kill metric: a task's arm changed after the day moves none of the day's events or tasks
    to another arm; a task switched during the day counts, its injections and reads alike, in its arm at the day's
    end, in both read-rate tables."""
    token = mem.remember(project="acme", kind="env", type="semantic", title="Fact",
                         body="The cache is warmed at 06:00 because traffic peaks at 07:00.").token
    mem.effective_memory("T-1")
    mem.record_events("acme", "T-1", [{"token": token, "kind": "injected"}, {"token": token, "kind": "read"}])
    mem.effective_memory("T-2")
    mem.record_events("acme", "T-2", [{"token": token, "kind": "injected"}])
    mem.set_switch("task", "T-2", "off")  # T-2 is switched off mid-task: the whole task counts in "off"
    mem.effective_memory("T-2")
    mem.effective_memory("T-2")  # the same decision again the same day: recorded once
    mem.record_events("acme", "T-2", [{"token": token, "kind": "read"}])
    assert conn.execute("SELECT count(*) FROM memory_task_arm_history WHERE task_id = 'T-2'").fetchone()[0] == 2
    backdate(conn, (("memory_events", "at"), ("memory_task_arm_history", "decided_at")), "1 day")
    day = today - timedelta(days=1)

    def day_rows():
        analytics.compute_read_rate(conn, day)
        return (conn.execute("SELECT arm, injections, reads FROM read_rate_metrics WHERE day = %s ORDER BY arm",
                             (day,)).fetchall(),
                conn.execute("SELECT arm, source, tasks, injected_tasks, used_tasks FROM read_rate_arms "
                             "WHERE day = %s ORDER BY arm", (day,)).fetchall())

    first = day_rows()
    assert first == ([("off", 1, 1), ("on", 1, 1)], [("off", "task", 1, 1, 1), ("on", "default", 1, 1, 1)])
    mem.set_switch("task", "T-1", "off")  # today T-1's arm changes too
    assert mem.effective_memory("T-1")["value"] == "off"
    assert day_rows() == first


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_each_tasks_arm_is_its_last_decision_before_the_days_end_on_random_decisions_with_ties(mem, conn, clean,
                                                                                               today, seed):
    """analytics/_task_arms against the rule written out: the task's decision recorded last (the history's order)
    of those dated before the day's end, else 'unassigned'. Decisions fall on four instants, two of them after the
    day's end, so they tie and come after the day often."""
    rng = random.Random(seed)
    day = today - timedelta(days=3)
    end = datetime.combine(day + timedelta(days=1), time.min, tzinfo=UTC)
    instants = [end - timedelta(hours=30), end - timedelta(hours=6), end, end + timedelta(hours=6)]
    tasks = [f"T-{i}" for i in range(10)]
    expected = dict.fromkeys(tasks, "unassigned")
    for _ in range(20):
        task, at, value = rng.choice(tasks), rng.choice(instants), rng.choice(("on", "off"))
        conn.execute("INSERT INTO memory_task_arm_history (task_id, value, source, decided_at) "
                     "VALUES (%s, %s, 'task', %s)", (task, value, at))
        if at < end:
            expected[task] = value
    units = {}
    for i, task in enumerate(tasks):
        units[task] = mem.remember(project="acme", kind="note", type="semantic", title=f"Fact {i}",
                                   body=f"The service number {i} answers on port {7000 + i}.").unit_id
        conn.execute("INSERT INTO memory_events (unit_id, project, task_id, kind, at) "
                     "VALUES (%s, 'acme', %s, 'injected', %s)", (units[task], task, end - timedelta(hours=1)))
    analytics.compute_read_rate(conn, day)
    got = dict(conn.execute("SELECT unit_id::text, arm FROM read_rate_metrics WHERE day = %s", (day,)).fetchall())
    assert got == {units[task]: arm for task, arm in expected.items()}
    assert set(expected.values()) == {"on", "off", "unassigned"}  # every case drawn


def test_an_arm_written_by_any_writer_lands_in_the_arm_history_once_a_day_unless_it_changes(conn, clean):
    """The history is kept by a trigger, so no writer of memory_task_arms (an older release, a hand-written fix) can
    change a task's arm without the read-rate metrics seeing when."""
    upsert = ("INSERT INTO memory_task_arms (task_id, value, source, decided_at) VALUES ('T-9', %s, 'task', %s) "
              "ON CONFLICT (task_id) DO UPDATE SET value = EXCLUDED.value, decided_at = EXCLUDED.decided_at")
    for value, at in (("on", "2026-01-01 10:00Z"), ("on", "2026-01-01 11:00Z"), ("off", "2026-01-01 12:00Z"),
                      ("off", "2026-01-02 09:00Z")):
        conn.execute(upsert, (value, at))
    assert [(v, at.isoformat()) for v, at in conn.execute(
        "SELECT value, decided_at FROM memory_task_arm_history WHERE task_id = 'T-9' ORDER BY seq")] == [
        ("on", "2026-01-01T10:00:00+00:00"), ("off", "2026-01-01T12:00:00+00:00"),
        ("off", "2026-01-02T09:00:00+00:00")]


def test_the_analysts_connection_reads_the_measurements_and_cannot_write(mem, conn, clean, today):
    """Notebooks connect as memory_reader: every analytics frame works, no write of any kind does, and no unit text
    is readable, even after the session turns its read-only default off."""
    token = mem.remember(project="acme", kind="env", type="semantic", title="Fact",
                         body="The cache is warmed at 06:00 because traffic peaks at 07:00.").token
    mem.remember(project="acme", kind="env", type="semantic", title="Mine", persona="ana", visibility="private",
                 body="Ana's staging login goes through the bastion host.")
    mem.record_events("acme", "T-1", [{"token": token, "kind": "injected"}, {"token": token, "kind": "read"}])
    analytics.compute_read_rate(conn, today)
    with analytics.connect(clean) as reader:
        assert reader.execute("SELECT current_user").fetchone()[0] == "memory_reader"
        assert analytics.status_funnel(reader).to_dict("records") == [{"status": "active", "units": 2}]
        assert analytics.read_rate_by_day(reader)["read_rate"].tolist() == [1.0]
        for frame in (analytics.kill_list, analytics.review_queue, analytics.decay_latest,
                      analytics.rejections_by_reason):
            frame(reader)
        writes = ["INSERT INTO memory_switch VALUES ('kill', '', 'on')",
                  "UPDATE memory_units SET status = 'retired'",
                  "DELETE FROM memory_events",
                  "TRUNCATE read_rate_metrics",
                  "CREATE TABLE scratch (x int)",
                  "INSERT INTO audit_log (action) VALUES ('x')"]
        for sql in writes:
            with pytest.raises((psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.InsufficientPrivilege)):
                reader.execute(sql)
        reader.execute("SET default_transaction_read_only = off")
        reader.execute("RESET ROLE")  # the session itself is memory_reader's: no role to fall back to
        assert reader.execute("SELECT current_user, session_user").fetchone() == ("memory_reader", "memory_reader")
        for sql in writes:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                reader.execute(sql)
        for sql in ("SELECT title FROM memory_units", "SELECT body FROM memory_inbox",
                    "SELECT bundle FROM memory_bundles", "SELECT embedding FROM memory_embeddings"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                reader.execute(sql)
    assert conn.execute("SELECT count(*) FROM memory_switch").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM memory_events").fetchone()[0] == 2


def test_the_analyst_url_must_name_the_read_only_role(clean, monkeypatch):
    """MEMORY_ASSETS_ANALYST_URL is how the lab reaches a server where the reader has a password: a URL naming any
    other user (the owner) is refused before connecting; one naming memory_reader is used; an explicit URL wins."""
    info = psycopg.conninfo.conninfo_to_dict(clean)
    monkeypatch.setenv(V.ANALYST_URL_ENV, psycopg.conninfo.make_conninfo("", **dict(info, user="postgres")))
    with pytest.raises(ValidationError, match=V.ANALYST_URL_ENV):
        analytics.connect()
    monkeypatch.setenv(V.ANALYST_URL_ENV, psycopg.conninfo.make_conninfo("", **dict(info, user=V.READER_ROLE)))
    with analytics.connect() as reader:
        assert reader.execute("SELECT session_user").fetchone()[0] == V.READER_ROLE
    monkeypatch.setenv(V.ANALYST_URL_ENV, "postgresql://postgres@nowhere.invalid/x")
    with analytics.connect(clean) as reader:
        assert reader.execute("SELECT session_user").fetchone()[0] == V.READER_ROLE


# Newcombe, "Two-sided confidence intervals for the single proportion" (Stat Med 1998;17:857), Table I, Wilson's
# score interval without continuity correction
@pytest.mark.parametrize(("successes", "trials", "expected"), [
    (81, 263, (0.2553, 0.3662)), (15, 148, (0.0624, 0.1605)), (0, 20, (0.0, 0.1611)), (1, 29, (0.0061, 0.1718)),
    (29, 29, (0.8830, 1.0)),
])
def test_wilson_interval_matches_newcombes_published_values(successes, trials, expected):
    assert analytics.wilson_interval(successes, trials) == pytest.approx(expected, abs=5e-5)


# Newcombe, "Interval estimation for the difference between independent proportions" (Stat Med 1998;17:873),
# Table II, method 10 (hybrid score, no continuity correction)
@pytest.mark.parametrize(("counts", "expected"), [
    ((56, 70, 48, 80), (0.0524, 0.3339)), ((9, 10, 3, 10), (0.1705, 0.8090)), ((6, 7, 2, 7), (0.0582, 0.8062)),
    ((5, 56, 0, 29), (-0.0381, 0.1926)), ((0, 10, 0, 20), (-0.1611, 0.2775)), ((10, 10, 0, 20), (0.6791, 1.0)),
])
def test_difference_interval_matches_newcombes_method_10(counts, expected):
    assert analytics.difference_interval(*counts) == pytest.approx(expected, abs=5e-5)


def test_intervals_at_their_edges():
    assert analytics.wilson_interval(0, 0) == (0.0, 1.0)  # no task, no information
    assert analytics.difference_interval(3, 5, 0, 0) == (-1.0, 1.0)
    narrow, wide = analytics.wilson_interval(12, 40, 0.9), analytics.wilson_interval(12, 40, 0.99)
    assert wide[0] < narrow[0] < 12 / 40 < narrow[1] < wide[1]
    assert analytics.z_score(0.95) == pytest.approx(1.959964, abs=1e-6)
    for bad in ((5, 4), (-1, 4), (1, -1)):
        with pytest.raises(ValidationError, match="successes"):
            analytics.wilson_interval(*bad)
    for confidence in (0.0, 1.0, 1.5):
        with pytest.raises(ValidationError, match="confidence"):
            analytics.wilson_interval(1, 2, confidence)


def test_a_comparison_below_the_minimum_of_tasks_says_so_however_large_the_difference():
    few = V.ARM_MIN_TASKS - 1
    small = analytics.compare_arms(few, few, 0, V.ARM_MIN_TASKS)  # every task against none
    assert small.low > 0 and not small.enough
    assert small.verdict.startswith("Too few tasks to compare") and f"at least {V.ARM_MIN_TASKS}" in small.verdict
    assert not analytics.compare_arms(0, 0, 0, 0).enough
    assert analytics.compare_arms(0, 0, 0, 0).difference is None

    n = V.ARM_MIN_TASKS
    higher = analytics.compare_arms(n, n, 0, n)
    assert higher.enough and higher.verdict.startswith("Memory on is higher")
    assert analytics.compare_arms(0, n, n, n).verdict.startswith("Memory on is lower")
    same = analytics.compare_arms(n // 2, n, n // 2, n)
    assert same.low < 0 < same.high and same.verdict.startswith("No difference shown")
    assert analytics.compare_arms(n, n, 0, n, min_tasks=n + 1).enough is False

    table = higher.table()
    assert table["arm"].tolist() == ["on", "holdout", "difference (on - holdout)"]
    assert table["tasks"].tolist()[:2] == [n, n] and table["rate"].tolist() == [1.0, 0.0, 1.0]
    assert (table["95% CI low"].tolist()[2], table["95% CI high"].tolist()[2]) == (higher.low, higher.high)


def test_randomised_arms_keep_the_two_drawn_arms_only():
    counts = pd.DataFrame([
        (date(2026, 1, 2), "on", "default", 28, 40, 30, 25),
        (date(2026, 1, 2), "off", "holdout", 28, 38, 0, 6),
        (date(2026, 1, 2), "on", "task", 28, 9, 9, 9),      # set by hand: not drawn
        (date(2026, 1, 2), "off", "killed", 28, 3, 0, 0),
        (date(2026, 1, 1), "on", "default", 28, 10, 8, 5),
    ], columns=["day", "arm", "source", "window_days", "tasks", "injected_tasks", "used_tasks"])
    arms = analytics.randomised_arms(counts)
    assert arms[["day", "arm", "tasks", "used"]].values.tolist() == [
        [date(2026, 1, 1), "on", 10, 5], [date(2026, 1, 2), "holdout", 38, 6], [date(2026, 1, 2), "on", 40, 25]]
    assert arms["rate"].tolist() == [0.5, 6 / 38, 25 / 40]
    low, high = analytics.wilson_interval(6, 38)
    assert arms.iloc[1][["low", "high"]].tolist() == [low, high]
    assert analytics.randomised_arms(counts.iloc[0:0]).empty


def test_read_rate_arms_count_tasks_per_arm_and_the_comparison_reads_them(mem, conn, clean, today):
    """The read-rate asset's function also writes the arms' task counts of the trailing window; the comparison reads
    the two drawn arms through the analysts' connection, leaving out tasks set by hand."""
    token = mem.remember(project="acme", kind="env", type="semantic", title="Fact",
                         body="The cache is warmed at 06:00 because traffic peaks at 07:00.").token
    mem.set_switch("holdout", "", "50")
    mem.set_switch("task", "T-manual", "on")
    expected = {"on": [0, 0], "holdout": [0, 0]}
    for i in range(40):
        task = f"T-{i}"
        arm = "holdout" if mem.effective_memory(task)["source"] == "holdout" else "on"
        expected[arm][1] += 1
        if arm == "on":
            mem.record_events("acme", task, [{"token": token, "kind": "injected"}])
        if i % 3 == 0:
            mem.record_events("acme", task, [{"token": token, "kind": "read"}])
            expected[arm][0] += 1
    mem.effective_memory("T-manual")
    mem.record_events("acme", "T-manual", [{"token": token, "kind": "injected"}, {"token": token, "kind": "read"}])
    mem.record_events("acme", "T-no-arm", [{"token": token, "kind": "read"}])  # no decision recorded: no arm
    analytics.compute_read_rate(conn, today)
    analytics.compute_read_rate(conn, today)  # a re-run replaces the day's counts
    with analytics.connect(clean) as reader:
        counts = analytics.arm_counts(reader)
        comparison = analytics.arm_comparison(reader)
    by_arm = {(r["arm"], r["source"]): (r["tasks"], r["injected_tasks"], r["used_tasks"])
              for r in counts.to_dict("records")}
    assert by_arm == {("on", "default"): (expected["on"][1], expected["on"][1], expected["on"][0]),
                      ("off", "holdout"): (expected["holdout"][1], 0, expected["holdout"][0]),
                      ("on", "task"): (1, 1, 1)}
    assert set(counts["day"]) == {today} and set(counts["window_days"]) == {V.ARM_WINDOW_DAYS}
    assert (comparison.on.used, comparison.on.tasks) == tuple(expected["on"])
    assert (comparison.holdout.used, comparison.holdout.tasks) == tuple(expected["holdout"])
    assert not comparison.enough and comparison.verdict.startswith("Too few tasks")  # 40 tasks in two arms
