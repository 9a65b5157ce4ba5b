"""The benchmark harness at its smoke size: every part runs, writes its JSON, and the summary names every goal.

No timing is asserted: the figures only have a shape here. The mem0 peer runs when the `peer` extra is installed and
is skipped with its message otherwise; its network guard is checked without sending a packet anywhere.
"""

from __future__ import annotations

import errno
import itertools
import json
import socket
from collections import Counter

import pytest

from bench import harness, peer_mem0

SAMPLE = {
    "sample_id": "conv-h1",
    "conversation": {
        "speaker_a": "Ada", "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ada", "dia_id": "D1:1", "text": "I moved to Porto in spring."},
                      {"speaker": "Bo", "dia_id": "D1:2", "text": "Lovely, near the river?"}],
        "session_2_date_time": "10:04 am on 2 June, 2023",
        "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "I run a bakery in Lyon now."}],
    },
    "observation": {},
    "qa": [
        {"question": "Where did Ada move?", "evidence": ["D1:1"], "category": 4},
        {"question": "Where is Bo's bakery?", "evidence": ["D2:1"], "category": 4},
        {"question": "Which cities?", "evidence": ["D1:1; D2:1"], "category": 1},
        {"question": "Did Ada buy a boat?", "evidence": [], "category": 5},
    ],
}


def test_trimming_keeps_the_first_sessions_and_only_questions_answerable_from_them():
    [one] = peer_mem0.trimmed([SAMPLE, SAMPLE], conversations=1, sessions=1, questions=0)
    assert [k for k in one["conversation"] if k.startswith("session_")] == ["session_1_date_time", "session_1"]
    assert [qa["question"] for qa in one["qa"]] == ["Where did Ada move?", "Did Ada buy a boat?"]
    [first] = peer_mem0.trimmed([SAMPLE], conversations=0, sessions=0, questions=1)
    assert [qa["question"] for qa in first["qa"]] == ["Where did Ada move?"]
    assert "session_2" in SAMPLE["conversation"]  # the caller's data is left as it was


def test_every_system_follows_every_other_equally_often():
    """A call is slower after another system's model (its threads spinning, caches refilled): over a cycle of
    questions each system is asked first, and right after each other one, the same number of times."""
    cycle = [peer_mem0.asking_order(i) for i in range(len(peer_mem0.ORDERS))]
    assert all(sorted(order) == sorted(peer_mem0.SYSTEMS) for order in cycle)
    firsts = Counter(order[0] for order in cycle)
    pairs = Counter(pair for order in cycle for pair in itertools.pairwise(order))
    n = len(peer_mem0.SYSTEMS)
    assert set(firsts.values()) == {len(cycle) // n} and len(firsts) == n
    assert set(pairs.values()) == {len(cycle) // n} and len(pairs) == n * (n - 1)
    assert peer_mem0.asking_order(len(cycle)) == cycle[0]


def test_the_network_guard_refuses_every_address_outside_loopback(monkeypatch):
    reached = []
    monkeypatch.setattr(socket.socket, "connect", lambda sock, address: reached.append(address))
    guard = peer_mem0.NetworkGuard().install()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            with pytest.raises(OSError) as refused:
                sock.connect(("192.0.2.1", 443))  # never reaches the (recording) original connect
            sock.connect(("127.0.0.1", 5432))
    finally:
        guard.uninstall()
    assert refused.value.errno == errno.ENETUNREACH and reached == [("127.0.0.1", 5432)]
    assert len(guard.refused) == 1
    allows = peer_mem0.NetworkGuard.allows
    assert allows(socket.AF_INET6, ("::1", 1, 0, 0)) and allows(socket.AF_INET, ("localhost", 1))
    assert allows(socket.AF_UNIX, "/tmp/.s.PGSQL.5432")
    assert not allows(socket.AF_INET, ("10.0.0.1", 1)) and not allows(socket.AF_INET, ("huggingface.co", 443))
    assert not allows(socket.AF_INET6, ("2001:db8::1", 443, 0, 0))


def test_a_goal_reads_its_figure_and_says_by_how_much_it_is_missed():
    above, below, nothing = ({"peer": {"ratios": {"ours_vs_mem0_p95": value}}} for value in (1.5, 0.25, None))
    goal = harness.GOALS[0]
    assert harness.verdict(goal, harness.read_goal(goal, above), {})["verdict"] == f"missed: 3.00{harness.X} the bound"
    assert harness.verdict(goal, harness.read_goal(goal, below), {})["met"] is True
    skipped = harness.verdict(goal, harness.read_goal(goal, nothing), {"peer": {"status": "failed"}})
    assert skipped["met"] is None and skipped["verdict"] == "not measured: the part failed"
    load = next(g for g in harness.GOALS if g.part == "load")
    assert harness.read_goal(load, {"load": {"ratios": {"recall_p95_under_load_vs_alone": 2.5}}}) == 2.5
    assert harness.read_goal(load, {"load": {"ratios": {}}}) is None


def test_a_recall_ratio_that_no_recall_could_reach_says_so():
    """recall@10 / mem0's >= 2 cannot be met once mem0 finds more than half of the evidence: the verdict says
    where the ceiling lies instead of suggesting that more work would meet it."""
    goal = next(g for g in harness.GOALS if g.ceiling)
    results = {"peer": {"ratios": {"recall_at_10_ours_vs_mem0": 1.674}, "systems": {"mem0": {"recall_at_10": 0.5033}}}}
    row = harness.verdict(goal, harness.read_goal(goal, results), {}, harness.read_goal(goal, results, goal.ceiling))
    assert row["met"] is False and "caps the ratio at 1.99" in row["verdict"], row
    reachable = {"peer": {"ratios": {"recall_at_10_ours_vs_mem0": 1.9}, "systems": {"mem0": {"recall_at_10": 0.446}}}}
    row = harness.verdict(goal, 1.9, {}, harness.read_goal(goal, reachable, goal.ceiling))
    assert row["verdict"] == "missed: 0.95 of the target", row


# freshness starts `memory-assets dev` with its daemon; tests/deploy/test_topology.py runs that path already
SKIPPED_IN_MAKE_TEST = ["freshness"]


@pytest.mark.timeout(1800)  # every part in its own process, on a shared 2-core machine
def test_the_smoke_size_runs_every_part_and_writes_its_json_and_the_summary(tmp_path):
    report = harness.run("smoke", tmp_path, skip=SKIPPED_IN_MAKE_TEST, part_timeout=900)
    written = json.loads((tmp_path / "harness.json").read_text())
    expected = {p.name for p in harness.PARTS} - set(SKIPPED_IN_MAKE_TEST)
    assert written["parts"] == report["parts"] and set(report["parts"]) == expected
    for name, state in report["parts"].items():
        assert state["status"] in ("ok", "absent"), (name, state)
        for file in state.get("files", []):
            assert json.loads((tmp_path / file).read_text())["benchmark"] == file.removesuffix(".json")
    ran = {name for name, state in report["parts"].items() if state["status"] == "ok"}
    assert {"ingest", "embed", "recall", "load", "graph", "tracing", "peer"} <= ran
    assert [g["goal"] for g in report["goals"]] == [g.name for g in harness.GOALS]
    measured = {g["part"] for g in report["goals"] if g["measured"] is not None}
    assert {"ingest", "embed", "graph"} <= measured  # the 100k and 1M goals are not measured at the smoke size
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("# Benchmarks (smoke size)") and "Load average" in summary
    assert all(g.name in summary for g in harness.GOALS)
    peer = json.loads((tmp_path / "peer.json").read_text())
    if peer_mem0.peer_available():
        assert set(peer["systems"]) == {"memory_assets", "mem0", "floor", "floor_torch"}
        assert peer["peer"]["llm_calls"] == 0
        assert peer["peer"]["network"]["non_loopback_connections_refused"] == 0
        assert peer["questions"] >= 1 and "ours_vs_mem0_p95" in peer["ratios"]
        settled = peer["settled"]  # the questions asked again, each call after a pause
        assert settled["pause_ms"] == peer_mem0.SETTLE_MS and set(settled["systems"]) == set(peer["systems"])
        assert all(s["questions"] == peer["questions"] for s in settled["systems"].values())
        assert settled["seconds"] >= peer["questions"] * len(peer_mem0.SYSTEMS) * peer_mem0.SETTLE_MS / 1000
        assert "ours_vs_mem0_p95" in settled["ratios"] and "Settled ratios" in summary
        assert "## Side by side" in summary and "| mem0 |" in summary
    else:
        assert peer["skipped"] == peer_mem0.SKIP_NO_PEER and peer_mem0.SKIP_NO_PEER in summary
    ingest = json.loads((tmp_path / "ingest.json").read_text())
    split = ingest["remember_1_us_per_call"]  # a call's wall, CPU on each side, and what the commit's flush adds
    assert set(split) == {"wall", "client_cpu", "server_cpu", "waiting", "flush_wait"} and split["client_cpu"] > 0
    assert ingest["units_per_second_median"]["remember_1_unflushed"] > 0
    graph = json.loads((tmp_path / "graph.json").read_text())
    assert graph["captured"] == 100 and graph["runs"] >= 6 and graph["ratio_wall_vs_asset_times"] > 0
