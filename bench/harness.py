"""One harness for `make bench` and `memory-assets bench`: every benchmark part in its own process, one JSON per
part and a markdown summary (summary.md) with every goal of issue #15, met or missed by how much."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import multiprocessing
import os
import platform
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common

REPO = Path(__file__).resolve().parent.parent
SIZES = ("smoke", "default", "full")
X = "\N{MULTIPLICATION SIGN}"


@dataclass(frozen=True)
class Part:
    """A benchmark part: the module whose main() runs it, its arguments per size, and what it measures."""

    name: str
    module: str
    what: str
    argv: dict[str, list[str]]


PARTS = (
    Part("ingest", "bench.ingest", "remember() with 1 and 8 writers, bulk import, raw COPY", {
        "smoke": ["--remember", "20", "--import-size", "200", "--repeats", "1"], "default": [], "full": []}),
    Part("embed", "bench.embed", "the embedding stage against raw model.encode()", {
        "smoke": ["--units", "64", "--repeats", "1", "--warmup", "0"], "default": [], "full": []}),
    Part("recall", "bench.recall", "recall() against numpy at each size (the scale curve)", {
        "smoke": ["--sizes", "2000", "--queries", "20", "--beside", "0", "--among", "3"],
        "default": ["--sizes", "10000,100000"], "full": ["--sizes", "10000,100000,1000000"]}),
    Part("freshness", "bench.freshness", "time until a written unit is searchable (memory-assets dev running)", {
        "smoke": ["--samples", "2", "--corrections", "1"], "default": [], "full": []}),
    Part("load", "bench.load", "recall under 16 writers and 4 readers against recall alone", {
        "smoke": ["--units", "200", "--seconds", "5"], "default": [], "full": []}),
    Part("graph", "bench.scale", "a daily asset-graph run over new units", {
        "smoke": ["--units", "100"], "default": ["--units", "10000"], "full": ["--units", "10000"]}),
    Part("curation", "bench.curation", "curation's HNSW nearest-neighbour walk against the exact scan", {
        "smoke": ["--units", "300", "--sample", "20"], "default": [], "full": ["--units", "20000"]}),
    Part("tracing", "bench.tracing", "the spans' cost on remember() and recall(), traces off and on", {
        "smoke": ["--calls", "20", "--span-loops", "10000"], "default": [], "full": []}),
    Part("peer", "bench.peer_mem0", "memory-assets, mem0 and the encode+numpy floor on LoCoMo, side by side", {
        "smoke": ["--conversations", "1", "--sessions", "1", "--questions", "5"],
        "default": ["--conversations", "3"], "full": ["--conversations", "0"]}),
)


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def machine() -> dict:
    """What the figures ran on: CPU model, cores, memory, Python, and the commit."""
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    mem_kib = next((int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                    if line.startswith("MemTotal")), 0) if Path("/proc/meminfo").exists() else 0
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem_kib / 2**20, 1),
            "python": platform.python_version(), "commit": commit.stdout.strip() or None}


def _child(module: str, argv: list[str], out: str) -> None:
    """Run one part's main() with its arguments, its JSON written under `out` (spawned: a fresh process)."""
    common.RESULTS = Path(out)
    sys.argv = [module, *argv]
    importlib.import_module(module).main()


def run_part(part: Part, argv: list[str], out: Path, timeout: float | None) -> dict:
    """One part in a spawned process: status, exit code, seconds, load average and the JSON files it wrote."""
    if importlib.util.find_spec(part.module) is None:
        return {"status": "absent", "reason": f"{part.module.replace('.', '/')}.py is not in this tree"}
    before = {p: p.stat().st_mtime for p in out.glob("*.json")}
    record: dict = {"argv": argv, "load_before": loadavg()}
    start = time.perf_counter()
    process = multiprocessing.get_context("spawn").Process(target=_child, args=(part.module, argv, str(out)))
    process.start()
    process.join(timeout)
    if process.is_alive():  # an interrupt first, so the part's own clean-up stops what it started
        os.kill(process.pid, signal.SIGINT)
        process.join(60)
        if process.is_alive():
            process.terminate()
            process.join()
        record["status"] = "timed out"
    else:
        record["status"] = "ok" if process.exitcode == 0 else "failed"
    record.update(exit_code=process.exitcode, seconds=round(time.perf_counter() - start, 1), load_after=loadavg())
    record["files"] = sorted(p.name for p in out.glob("*.json") if before.get(p) != p.stat().st_mtime)
    return record


# --- The goals of issue #15, each read from the part that measures it ---------------------------------------------

@dataclass(frozen=True)
class Goal:
    """A ratio or rate the issue asks for: where it is read, its bound, and the next step when it is missed."""

    name: str
    part: str
    path: tuple[str, ...]
    bound: float
    at_most: bool
    unit: str
    next_step: str
    ceiling: tuple[str, ...] = ()  # for a ratio to a peer's recall: where that recall is read (1/it caps the ratio)


GOALS = (
    Goal("end-to-end recall p95 / mem0 search() p95 (LoCoMo, encoding included)", "peer",
         ("ratios", "ours_vs_mem0_p95"), 0.5, True, X,
         "mem0's time is mostly its torch encode, which varies by machine (the torch floor 9-13 ms p50 on these); "
         "ours is a one-thread ONNX encode (the floor's), during which the server runs the full-text statement, "
         "then the nearest vectors alone in a project of at most 1,000 numbered units, whose every unit that "
         "statement details and recall checks them against (docs/scaling.md items 27, 29-31, 33), fusion, scoring "
         "and the cited text. A cold call at 5e1c7ff, "
         "slow hour: the encode 7.1 ms beside the server's statement (5.2 alone), then ~8 ms, Python ~4.7 of it "
         "(parsing ~650 rows 1.2-1.8, fusing 0.45-0.65, scoring 1.0-1.55, citations and hits ~1.2; item 31), so half "
         "of mem0's p95 needs what follows the encode under ~7 ms at p95. Since item 34 fusion and scoring run over "
         "the pool's columns (0.74x alone, cold calls 0.98x), and a unit's one persona and session travel as texts "
         "(item 35: the rows' parse 0.67x, cold calls 0.975x), and the details as columns with each validity start "
         "read as its binary form's microseconds (item 37: cold calls 0.978x, then 0.984x), and the statements' "
         "context sent once instead of on every row (item 38: 0.975x). Next: in a fast spell at 12fd53f "
         "the full-text statement outlasts the encode by ~1 ms (its ts_rank of every matching unit ~0.4 ms of it; "
         "ranking only the leg's top saved nothing, item 33; a small project's units read in one scan, 0.95x "
         "alone, 0.99x in whole calls, item 34); fewer candidates per leg, a trade (both legs at 100: 11 % off a "
         "cold call for R@10 0.8035 -> 0.7965, item 23); the int8 query encoder kept only 0.935 of torch's top 10"),
    Goal("recall@10 of evidence / mem0's", "peer", ("ratios", "recall_at_10_ours_vs_mem0"), 2.0, False, X,
         "multi-hop and open-domain questions: a reranker or query expansion",
         ceiling=("systems", "mem0", "recall_at_10")),
    Goal("end-to-end recall p95 / encode+numpy floor p95", "peer", ("ratios", "ours_vs_floor_p95"), 1.5, True, X,
         "the same steps as for mem0: the floor is the question's encoding plus one matrix product, with no "
         "full-text leg, fusion, conversation structure or citations"),
    Goal("recall p95 at 100k units / numpy p95 (ex encoding)", "recall", ("sizes", "100000", "ratio_p95"), 2.0, True,
         X, "what is around the search (a 10k-unit call: ~2.2 ms of 3.1 ms p50 after the round trips went from six "
         "to four: the pool's check, the candidates statement's details and neighbours beyond the walk, the cited "
         "text, fusion; docs/scaling.md item 9) and the walk's tail at ef_search ~316; the search alone is about "
         "numpy's time (1.0-1.3x); the ratio moves with the machine's BLAS (numpy's 100k scan 5.4 ms on a Xeon, "
         "12.1 ms on an EPYC here)"),
    Goal("remember(), one writer", "ingest", ("units_per_second_median", "remember_1"), 1000, False, " units/s",
         "ingest.json's remember_1_us_per_call splits a call into this process's CPU, the server backend's and "
         "waiting, and remember_1_unflushed is the same calls with synchronous_commit off (a diagnostic, never an "
         "acknowledged write): on a 2-vCPU Xeon ~0.4 + ~0.7 ms of CPU and 0.4-0.75 ms waiting, mostly the commit's "
         "WAL flush (0.25-0.75 ms by the hour; 952/s unflushed at 570b53d), dearer after a call's CPU than back "
         "to back as durable_commit measures it (docs/scaling.md item 25). Since 84df565 the write is its "
         "connection's check (item 2), since 12ee84d the gates skip detectors whose literals a text lacks (item 21), "
         "since sql/034 the entries and tsv functions are compiled once per session (item 24: 1.12x), since sql/036 "
         "the units' fourteen CHECK rules are one CHECK on a function compiled once per session (item 40: the "
         "backend's CPU 0.965x, 1.019x in twelve pairs), since sql/045 the write's link of its inbox row is a HOT "
         "update, and the gates search each exclusion phrase only where its screen lets it match and case-fold an "
         "ASCII text by lower() alone (item 50: this part 1.059x in four alternating pairs, 1,007-1,029/s on an EPYC; "
         "the gates 103 -> 65 us). "
         "Next: a call's CPU halved (the executor set-up of ~18 statements with the triggers' and the foreign keys', "
         "the AFTER triggers, the unit's index entries, the client's ~0.29 ms); past the flush only batching "
         "(remember_many), never an unflushed acknowledgement"),
    Goal("CLI import (remember_many in batches, gated in parallel)", "ingest", ("units_per_second_median", "import"),
         5000, False, " lines/s",
         "the gates of the next batch run beside the capture of the one before, and its capture beside the fold of the "
         "one before that; since 1430eea each batch is captured and folded in one transaction on one of two writers, "
         "its inbox links HOT updates, and the first batch is 250 lines, doubling to 1,000 (1.119x in three "
         "alternating harness pairs on one EPYC at a20dedb; docs/scaling.md item 51). The fold is the critical path: "
         "~140 us a row alone, ~160-180 with the capture, the gates (~70 us a line) and this process (~80 us) beside "
         "it on two cores, and folds of one project serialise on its counter row (gap-free numbers). The command ends "
         "with the planner's statistics refreshed beside the last folds and the pending full-text entries merged after "
         "them (items 11-12, 26, 51). Measured no better: the batches' commits unflushed (1.025x), the merge beside "
         "the last folds, the key columns under COLLATE \"C\" (the fold 0.983x), each part of the fold dropped in turn "
         "(0.97-1.0x each); without the four foreign keys each folded row is checked against, 1.100x, short of the "
         "goal still, and they are kept (item 52). The command is bound by CPU (~320 us a line, 76 % of two cores). "
         "The gate's secret scan of a clean text took 49 us, now 38 (1.026x the import), and its exclusion policy "
         "11.7, now 7.8 (1.036x; item 53); the capture's COPY told its column types and the literal screens "
         "nested by prefix, 1.012x (item 55); without the scan the import made 1.127x (item 52). Next: less CPU "
         "in the fold or beside it, none of which alone reaches 5,000 here"),
    Goal("embedding stage / raw encode()", "embed", ("ratio_stage_vs_raw_encode",), 0.9, False, X,
         "the writes already overlap the encoding (one batch in flight) and the figure follows an untimed warm-up "
         "with the order alternating; what is left is the server's HNSW inserts on the same two cores as the "
         "model, which the graph's ef_construction 128 made dearer (64 against 128, alternating on one EPYC: "
         "0.926 / 0.903 against 0.901 / 0.906x, then 0.888 / 0.854 against 0.799 / 0.797x; docs/scaling.md item "
         "14), the price of 0.98 instead of 0.95 of the exact top 10 at 100,000 units. An insert costs the server "
         "0.73-0.77 ms of CPU into a 1,000-vector graph on an EPYC (0.25 ms on a Xeon, 0.21 of it the graph's: "
         "item 41), 2.5-3.5 ms into a 100,000-vector one (item 15); a model's "
         "first run writes before it builds its graph (item 16: 0.916x where the stage was 0.875x in one run). "
         "Two one-thread encoder sessions in parallel, which the server's inserts cannot stall at a barrier, "
         "measured the same (0.875 against 0.879x, eight alternating repeats): it is the inserts' CPU, not how "
         "they interleave. On two cores every ms of the server's is one the model waits for; next: the server on "
         "cores of its own (a host of its own in the compose deployment), or a cheaper insert (m or "
         "ef_construction, item 14)"),
    Goal("recall p95 under 16 writers + 4 readers / alone", "load", ("ratios", "recall_p95_under_load_vs_alone"), 3.0,
         True, X,
         "bounded pools, gates off the readers' path, no lock across model calls (item 4); the writers grow the "
         "readers' project from 2,000 to ~10,000 units of one template, whose common words made the full-text leg "
         "read the whole project until it read its rarest terms' units only (docs/scaling.md item 18: the readers "
         "alone after the load 2.95x -> 1.39x the first alone phase, this ratio 3.57x -> 2.18x, back to back). "
         "load.json's recall_p95_alone_after_vs_before says how much of the ratio is the grown store; next: the "
         "writers' fold off the readers' cores (a server of its own)"),
    Goal("HNSW recall@10 vs exact at 1M units", "recall", ("sizes", "1000000", "recall_at_k_vs_exact"), 0.99, False,
         "", "the synthetic vectors (64 Gaussian clusters, near-random within each: the 10th and 11th exact scores "
         "0.0005 apart at the median) are HNSW's hard case: with ef_construction 128 ef_search 100-400 keeps "
         "0.47-0.74 (0.40-0.66 with 64, bench/results/epyc-a0b93a0-full); a raw walk on a graph built with 200 "
         "kept 0.78 at 400 and 0.84 at 600, and text-like vectors (LoCoMo turns plus noise of their own "
         "covariance) 0.84 at 400 and 0.91 at 1,000 with 64 (docs/scaling.md item 14); queries drawn from the "
         "clusters instead of a stored vector plus noise keep 0.93 at 400 on a 1M graph built alike (item 15). "
         "Next: m 32 at build (0.99 at ef_search 100 on 100,000 vectors, a 2.7x build), or an exact re-rank of a wider "
         "candidate set"),
    Goal("recall p95 at 1M units", "recall", ("sizes", "1000000", "ours_ms", "p95"), 20.0, True, " ms",
         "the HNSW walk itself (the search 14.2 of a 16.6 ms p50 call at ef_search 400 with the index in the page "
         "cache; 34 of 44 ms when PostgreSQL's 128 MB held a thirtieth of it: docs/scaling.md item 13); the same "
         "run's ef_search sweep timed 15.8 / 17.8 ms p50 / p95 at 400, and a0b93a0 17.3 ms p95 on the graph built "
         "with ef_construction 64: the bound is within the machine's noise (19.5 ms p95 at a4c9525 on the "
         "half-precision graph, whose raw walks took the time of full precision's, docs/scaling.md item 15). Next: "
         "a partitioned index, a smaller ef_search once recall holds"),
    Goal("daily graph run wall time / sum of its asset times", "graph", ("ratio_wall_vs_asset_times",), 1.5, True,
         X, "one run for the whole day instead of one per asset"),
)


def read_goal(goal: Goal, results: dict[str, dict], path: tuple[str, ...] | None = None) -> float | None:
    """The goal's measured value (or the figure at `path`) from its part's JSON, or None when that part did not
    measure it."""
    data = results.get(goal.part)
    if not data:
        return None
    value: object = data
    for key in goal.path if path is None else path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def verdict(goal: Goal, value: float | None, parts: dict[str, dict], peer_recall: float | None = None) -> dict:
    """Met, missed by how much (a factor of the bound), or not measured and why; a ratio to a peer's recall that
    no recall of ours could reach (1 / the peer's recall is below the bound) says so."""
    bound = f"{'≤' if goal.at_most else '≥'} {goal.bound:g}{goal.unit}"
    row = {"goal": goal.name, "bound": bound, "part": goal.part}
    if value is None:
        state = parts.get(goal.part, {})
        why = state.get("reason") or (f"the part {state['status']}" if state.get("status") not in (None, "ok")
                                      else "not measured at this size")
        return {**row, "measured": None, "met": None, "verdict": f"not measured: {why}", "next": ""}
    met = value <= goal.bound if goal.at_most else value >= goal.bound
    if met:
        text = "met"
    elif goal.at_most:
        text = f"missed: {value / goal.bound:.2f}{X} the bound"
    else:
        text = f"missed: {value / goal.bound:.2f} of the target"
        if peer_recall and 1 / peer_recall < goal.bound:
            text += (f"; out of reach in this run: the peer's recall of {peer_recall:g} caps the ratio at "
                     f"{1 / peer_recall:.2f}{X}, with the evidence of every question found")
    return {**row, "measured": round(value, 3), "met": met, "verdict": text, "next": "" if met else goal.next_step}


# --- Markdown -------------------------------------------------------------------------------------------------------

def cell(value: object) -> str:
    """A markdown table cell: a dash for nothing, pipes escaped (a model-day partition key holds one)."""
    return "—" if value is None else str(value).replace("|", "\\|")


def table(header: list[str], rows: list[list[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]


def settled_lines(settled: dict | None) -> list[str]:
    """The settled pass (each call after a pause, so no torch worker still spins from the call before): its table
    and ratios, beside the back-to-back figures the goals read."""
    if not settled:
        return []
    lines = ["", f"Settled: the same questions asked again the same way, each call after a pause of "
             f"{settled['pause_ms']:g} ms, the two passes interleaved per question (back to back, a torch call's "
             "OpenMP worker spins on one of the cores for ~7 ms after it; `docs/scaling.md` item 28). The goals read "
             "the back-to-back figures above.", ""]
    return [*lines, *systems_table(settled["systems"]), "", f"Settled ratios: {timing_ratios(settled['ratios'])}.",
            ""]


def systems_table(systems: dict) -> list[str]:
    """One pass's latency and evidence recall per system, as a table."""
    return table(["system", "p50 ms", "p95 ms", "mean ms", "recall@10 of evidence"],
                 [[name, s["p50_ms"], s["p95_ms"], s["mean_ms"], s["recall_at_10"]] for name, s in systems.items()])


def timing_ratios(ratios: dict) -> str:
    """One pass's latency ratios: ours to mem0 and ours and mem0 to the floor."""
    return (f"ours / mem0 p95 {ratios['ours_vs_mem0_p95']}{X} (p50 {ratios['ours_vs_mem0_p50']}{X}); "
            f"ours / floor p95 {ratios['ours_vs_floor_p95']}{X} (p50 {ratios['ours_vs_floor_p50']}{X}); "
            f"mem0 / floor p95 {ratios['mem0_vs_floor_p95']}{X}")


def peer_section(peer: dict) -> list[str]:
    if "skipped" in peer:
        return [f"**Skipped:** {peer['skipped']}"]
    systems = peer["systems"]
    lines = [f"{peer['conversations']} LoCoMo conversations, {peer['questions']} questions (categories 1-4), "
             f"k = {peer['k']}, {peer['peer']['package']} with infer=False ({peer['peer']['llm_calls']} LLM calls, "
             f"{peer['peer']['network']['non_loopback_connections_refused']} non-loopback connections refused). "
             f"Load average (1/5/15 min) before the questions {peer['load_average'].get('before_questions')}, "
             f"after {peer['load_average'].get('after_questions')}.", ""]
    lines += systems_table(systems)
    befores = ["none", *systems]
    for stat in ("p50", "p95"):
        if all(f"{stat}_ms_after" in s for s in systems.values()):
            lines += ["", f"{stat} ms by the system asked just before (the order cycles through every permutation, "
                      "so each follows each other equally often):", ""]
            lines += table(["system", *(f"after {b}" for b in befores)],
                           [[name, *(s[f"{stat}_ms_after"].get(b, "") for b in befores)]
                            for name, s in systems.items()])
    ratios = peer["ratios"]
    lines += ["", f"Ratios: {timing_ratios(ratios)}; "
              f"ours / torch floor p95 {ratios.get('ours_vs_floor_torch_p95')}{X}; "
              f"recall@10 ours / mem0 {ratios['recall_at_10_ours_vs_mem0']}{X}. The floor encodes with recall()'s "
              f"query encoder ({peer.get('query_encoder')}), the torch floor with the torch model mem0 runs.",
              *settled_lines(peer.get("settled")),
              f"Ingest: memory-assets {peer['ingest']['memory_assets_s']} s for "
              f"{peer['ingest']['memory_assets_units']} units (gates, inbox, the asset graph incl. embedding); mem0 "
              f"{peer['ingest']['mem0']['seconds']} s for {peer['ingest']['mem0']['turns']} add() calls "
              f"(p50 {peer['ingest']['mem0']['add_ms_p50']} ms each)."]
    return lines


def curve(recall: dict) -> list[dict]:
    """The scale curve from bench/recall.py's JSON: per size, ours against numpy at p95 and HNSW against exact."""
    rows = []
    for size, row in (recall.get("sizes") or {}).items():
        if not size.isdigit():
            continue
        hnsw = (row.get("paths") or {}).get("hnsw", {})
        rows.append({"units": int(size), "path": row.get("default_path"), "ef_search": row.get("ef_search"),
                     "ours_p95_ms": (row.get("ours_ms") or {}).get("p95"),
                     "numpy_p95_ms": (row.get("numpy_ms") or {}).get("p95"), "ratio_p95": row.get("ratio_p95"),
                     "recall_at_10_vs_exact": row.get("recall_at_k_vs_exact"),
                     "hnsw_p95_ms": hnsw.get("p95_ms"), "hnsw_recall_at_10_vs_exact": hnsw.get("recall_at_k_vs_exact"),
                     "full_text_p95_ms": (row.get("full_text_ms") or {}).get("p95")})
    return sorted(rows, key=lambda r: r["units"])


def scale_section(recall: dict) -> list[str]:
    rows = curve(recall)
    if not rows:
        return ["No sizes measured."]
    header = ["units", "path (ef_search)", "ours p95 ms", "numpy p95 ms", "ratio p95", "recall@10 vs exact",
              "full-text leg, one rare term, p95 ms"]
    body = [[f"{r['units']:,}", f"{r['path']} ({r['ef_search']})", r["ours_p95_ms"], r["numpy_p95_ms"], r["ratio_p95"],
             r["recall_at_10_vs_exact"], r["full_text_p95_ms"]] for r in rows]
    return [*table(header, body), "",
            "Synthetic clustered unit vectors bound to real units written through the write path (bench/recall.py); "
            "numpy = matrix @ query + argpartition over the same filtered vectors; the query vectors are given (no "
            "encoding)."]


def graph_section(graph: dict) -> list[str]:
    head = (f"{graph['units']:,} new units: wall {graph['wall_s']} s, sum of asset times "
            f"{graph['sum_of_asset_times_s']} s (ratio {graph['ratio_wall_vs_asset_times']}{X}), sum of run times "
            f"{graph['sum_of_run_times_s']} s, {graph['runs']} runs.")
    body = [[a["asset"], a["partition"], a["steps_s"], a["run_s"]] for a in graph["assets"]]
    return [head, "", *table(["asset", "partition", "steps s", "run s"], body)]


def summary(size: str, info: dict, parts: dict[str, dict], results: dict[str, dict], goals: list[dict]) -> str:
    m = info["machine"]
    lines = [f"# Benchmarks ({size} size)", "",
             f"Ran {info['ran_at']} on {m['cpu'] or 'an unknown CPU'}, {m['cores']} cores, {m['memory_gib']} GiB, "
             f"Python {m['python']}, commit {m['commit']}. Load average (1/5/15 min) {info['load_before']} at the "
             f"start, {info['load_after']} at the end. Ratios come from this one run; on a shared machine read them, "
             "not the absolute times.", "", "## Goals (issue #15)", ""]
    lines += table(["goal", "bound", "measured", "verdict", "next step"],
                   [[g["goal"], g["bound"], g["measured"], g["verdict"], g["next"]] for g in goals])
    lines += ["", "## Parts", ""]
    lines += table(["part", "what", "status", "seconds", "load before → after", "JSON"],
                   [[name, next(p.what for p in PARTS if p.name == name), state["status"], state.get("seconds"),
                     f"{state.get('load_before')} → {state.get('load_after')}" if "load_before" in state else None,
                     ", ".join(state.get("files", [])) or state.get("reason")] for name, state in parts.items()])
    if "peer" in results:
        lines += ["", "## Side by side: memory-assets, mem0 and the floor (LoCoMo dialog)", "",
                  *peer_section(results["peer"])]
    if "recall" in results:
        lines += ["", "## Scale curve", "", *scale_section(results["recall"])]
    if "graph" in results:
        lines += ["", "## Daily graph run", "", *graph_section(results["graph"])]
    if "curation" in results:
        cur = results["curation"]
        ms = cur["ms_per_newcomer"]
        lines += ["", "## Curation in a large project", "",
                  f"{cur['units']:,} units, {cur['newcomers']} newcomers: HNSW walk p50 {ms['hnsw']['p50']} ms vs "
                  f"exact scan {ms['exact']['p50']} ms (the scan's time / the walk's: {cur['speedup_p50']}{X}); "
                  f"same neighbour {cur['same_neighbour']}, same verdict {cur['same_verdict']}."]
    if "ingest" in results:
        rates = results["ingest"].get("units_per_second_median", {})
        lines += ["", "## Writes", "", "units/s (median): " + ", ".join(f"{k} {v}" for k, v in rates.items())]
    if "embed" in results:
        embed = results["embed"]
        lines += ["", "## Embedding", "", f"stage / raw encode(): {embed.get('ratio_stage_vs_raw_encode')}{X}; "
                  f"a model's first run (its graph built after its vectors) / raw encode(): "
                  f"{embed.get('ratio_first_run_vs_raw_encode')}{X} ({embed.get('units_per_second_median')})"]
    return "\n".join(lines) + "\n"


def run(size: str, out: Path, only: list[str] | None = None, skip: list[str] | None = None,
        part_timeout: float | None = None) -> dict:
    """Run the selected parts at a size, then write harness.json and summary.md under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    info = {"size": size, "ran_at": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine(),
            "load_before": loadavg()}
    parts: dict[str, dict] = {}
    results: dict[str, dict] = {}
    for part in PARTS:
        if (only and part.name not in only) or (skip and part.name in skip):
            continue
        print(f"== bench {part.name} ({size}): {part.what}", file=sys.stderr, flush=True)
        parts[part.name] = run_part(part, part.argv[size], out, part_timeout)
        files = parts[part.name].get("files", [])
        for name in files:  # what the part wrote in this run, by name; a single file also under the part's name
            results[Path(name).stem] = json.loads((out / name).read_text())
        if part.name not in results and len(files) == 1:
            results[part.name] = results[Path(files[0]).stem]
    info["load_after"] = loadavg()
    goals = [verdict(goal, read_goal(goal, results), parts,
                     read_goal(goal, results, goal.ceiling) if goal.ceiling else None) for goal in GOALS]
    report = {**info, "parts": parts, "goals": goals}
    (out / "harness.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "summary.md").write_text(summary(size, info, parts, results, goals))
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", choices=SIZES, default="default",
                        help="smoke: seconds per part, for CI; default: what the README reports; full: adds 1M units "
                             "to the scale curve and every LoCoMo conversation")
    parser.add_argument("--out", default=str(common.RESULTS), help="folder for the JSON files and summary.md")
    parser.add_argument("--only", default="", help="comma-separated parts: " + ",".join(p.name for p in PARTS))
    parser.add_argument("--skip", default="", help="comma-separated parts to leave out")
    parser.add_argument("--part-timeout", type=float, default=None, help="seconds before a part is stopped")
    args = parser.parse_args()
    report = run(args.size, Path(args.out), [p for p in args.only.split(",") if p] or None,
                 [p for p in args.skip.split(",") if p] or None, args.part_timeout)
    print((Path(args.out) / "summary.md").read_text())
    failed = [name for name, state in report["parts"].items() if state["status"] in ("failed", "timed out")]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
