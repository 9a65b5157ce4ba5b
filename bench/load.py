"""Recall under write load: 4 reader threads recall alone, then with 16 writer threads calling remember() in the same
process against the same embedded server, then alone again; p50/p95 of each phase side by side from one run, the
writes per second under load, and where readers waited (the pool's queue, from its statistics)."""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import median, percentile, scratch_memory, write_result
from bench.ingest import TOPICS, candidates, fields

QUESTIONS = ["how much memory does the {topic} service {n} need", "why does the {topic} working set grow",
             "what limits the {topic} batch {n}", "which {topic} service needs {m} GiB"]


def question(rng: random.Random) -> str:
    """A question no reader asked before (the query-vector cache would hide the model otherwise)."""
    return rng.choice(QUESTIONS).format(topic=rng.choice(TOPICS), n=rng.randrange(100_000), m=rng.randrange(1, 8))


def pool_counters(mem) -> dict[str, int]:
    stats = mem.pool.get_stats()
    return {k: stats.get(k, 0) for k in ("requests_num", "requests_queued", "requests_wait_ms", "requests_errors")}


def phase(mem, project: str, seconds: float, readers: int, writers: int, seed: int) -> dict:
    """Readers recall (and writers remember, when any) for `seconds`; latencies in ms, writes, pool waits."""
    stop = threading.Event()
    latencies: list[float] = []
    writes: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()

    def read(index: int) -> None:
        rng = random.Random(seed * 100 + index)
        while not stop.is_set():
            start = time.perf_counter()
            try:
                mem.recall(project, question(rng), k=10)
            except Exception as error:  # a failed recall is reported, never hidden in the latencies
                with lock:
                    errors.append(f"recall: {type(error).__name__}")
                continue
            with lock:
                latencies.append((time.perf_counter() - start) * 1000)

    def write(index: int) -> None:
        n = 0
        while not stop.is_set():
            try:
                mem.remember(**fields(10_000_000 * (seed + 1) + 100_000 * index + n, project))
            except Exception as error:
                with lock:
                    errors.append(f"remember: {type(error).__name__}")
            n += 1
        with lock:
            writes.append(n)

    before = pool_counters(mem)
    threads = [threading.Thread(target=read, args=(i,)) for i in range(readers)]
    threads += [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    after = pool_counters(mem)
    return {
        "readers": readers, "writers": writers, "seconds": round(elapsed, 1), "recalls": len(latencies),
        "recall_ms": {"p50": round(median(latencies), 1) if latencies else None,
                      "p95": round(percentile(latencies, 0.95), 1) if latencies else None,
                      "max": round(max(latencies), 1) if latencies else None},
        "writes_per_second": round(sum(writes) / elapsed, 1) if writers else 0,
        "pool": {k: after[k] - before[k] for k in after},
        "errors": sorted(set(errors)), "error_count": len(errors),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--units", type=int, default=2000, help="units in the project before the phases")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each phase")
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--writers", type=int, default=16)
    args = parser.parse_args(argv)
    project = "load"
    with scratch_memory() as mem:
        for start in range(0, args.units, 1000):
            mem.remember_many(candidates(min(1000, args.units - start), project, offset=start))
        model = mem.serving_model()
        mem.embed_changes(model)
        mem.recall(project, "warm the model and the plans", k=10)
        alone = phase(mem, project, args.seconds, args.readers, 0, seed=1)
        loaded = phase(mem, project, args.seconds, args.readers, args.writers, seed=2)
        alone_after = phase(mem, project, args.seconds, args.readers, 0, seed=3)
    p95_alone = alone["recall_ms"]["p95"]
    p95_loaded = loaded["recall_ms"]["p95"]
    write_result("load", {
        "phases": {"alone": alone, "under_load": loaded, "alone_after": alone_after},
        "ratios": {
            "recall_p95_under_load_vs_alone": round(p95_loaded / p95_alone, 2) if p95_alone and p95_loaded else None,
            "recall_p50_under_load_vs_alone": (round(loaded["recall_ms"]["p50"] / alone["recall_ms"]["p50"], 2)
                                               if alone["recall_ms"]["p50"] and loaded["recall_ms"]["p50"] else None),
            "recall_p95_alone_after_vs_before": (round(alone_after["recall_ms"]["p95"] / p95_alone, 2)
                                                 if p95_alone and alone_after["recall_ms"]["p95"] else None),
        },
        "sizes": {"units": args.units, "seconds": args.seconds, "readers": args.readers, "writers": args.writers,
                  "model": model},
        "note": "one process, one pool (the default size), one embedded server; each recall asks a new question, so "
                "the model encodes every one; the ratio is the goal (<= 3x), read beside the load average",
    })


if __name__ == "__main__":
    main()
