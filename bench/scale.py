"""Scale: a daily asset-graph run over N new units, in-process, its wall time against the sum of its asset times.

The scale curve (recall p95 against numpy, HNSW recall@10 against exact at 10k / 100k / 1M units) is bench/recall.py
run at those sizes; the harness reads it from recall.json."""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import scratch_memory, write_result
from bench.ingest import candidates
from memory_assets import embeddings
from memory_assets import vocabulary as V
from memory_assets.defs import runner

GRAPH_GOAL = 1.5  # wall time of the daily run at most 1.5x the sum of its asset times


def step_seconds(instance, run_id: str) -> dict[str, float]:
    """Each step of a run (the asset and each of its checks) with its duration in seconds, from Dagster's stats."""
    return {s.step_key: (s.end_time or s.start_time or 0) - (s.start_time or 0)
            for s in instance.get_run_step_stats(run_id)}


def graph_run(mem, units: int, project: str) -> dict:
    """Capture `units` candidates into the inbox, then materialise today's graph in this process, timed."""
    start = time.perf_counter()
    runner.code_location()  # loading the definitions and the model is a process's start-up, not the day's run
    embeddings.embedder_for(V.DEFAULT_SERVING_MODEL).encode(["warm up"])
    load_s = time.perf_counter() - start
    rows = candidates(units, project)
    captured = mem.remember_many(rows, fold_now=False)["captured"]
    instance = runner.dagster_instance(mem.url)
    start = time.perf_counter()
    results = runner.materialize_day(datetime.now(UTC).date(), instance)
    wall = time.perf_counter() - start
    assets, runs = [], 0.0
    for result in results:
        steps = step_seconds(instance, result.run_id)
        stats = instance.get_run_stats(result.run_id)
        run_s = (stats.end_time or 0) - (stats.launch_time or stats.start_time or 0)
        runs += run_s
        asset = next(iter(result.get_asset_materialization_events()), None)
        name = asset.asset_key.to_user_string() if asset else result.run_id[:8]
        assets.append({"asset": name, "partition": result.dagster_run.tags.get("dagster/partition"),
                       "steps_s": round(sum(steps.values()), 3), "run_s": round(run_s, 3), "steps": len(steps)})
    steps_total = sum(a["steps_s"] for a in assets)
    return {
        "units": units, "captured": captured, "runs": len(results), "wall_s": round(wall, 2),
        "sum_of_asset_times_s": round(steps_total, 2), "sum_of_run_times_s": round(runs, 2),
        "ratio_wall_vs_asset_times": round(wall / steps_total, 3) if steps_total else None,
        "goal_ratio_at_most": GRAPH_GOAL, "assets": assets, "process_start_s": round(load_s, 2),
        "note": "one in-process run per asset (defs.runner.materialize_day, the CLI's `materialize`); asset time = "
                "the duration of its steps (the asset and its checks) in Dagster's run stats; run time = the run "
                "from launch to end; the definitions and the model were loaded before the clock started",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--units", type=int, default=10_000, help="new units the daily run folds, embeds, curates")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with scratch_memory(graph=True) as mem:
        result = graph_run(mem, args.units, "graph-bench")
    write_result("graph", result)


if __name__ == "__main__":
    main()
