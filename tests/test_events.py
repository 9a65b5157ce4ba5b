"""Usage events and the memory switch: one row per (task, unit, kind), citations, task -> epic -> default."""

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from memory_assets import events


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
