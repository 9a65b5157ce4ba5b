"""Shared helpers for benchmarks: a private embedded server, timing, and the JSON result file."""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
# the LoCoMo development conversations, read in place from the workspace's shared data (never copied into the repo)
LOCOMO_DEV = Path(__file__).resolve().parent.parent.parent / "shared" / "benchmarks" / "locomo" / "locomo_dev.json"


@contextmanager
def scratch_memory(pool_size: int = 20, graph: bool = False):
    """A Memory on a throwaway embedded server (or DATABASE_URL), stopped afterwards; with graph=True the process's
    MEMORY_ASSETS_HOME points at it too, so the asset graph run in-process (defs.runner) writes to the same store."""
    import memory_assets
    from memory_assets import database

    home = tempfile.mkdtemp(prefix="memory_assets_bench_")
    if graph:
        os.environ["MEMORY_ASSETS_HOME"] = home
    try:
        server = None if os.environ.get("DATABASE_URL") else database.embedded_server(home)
        mem = memory_assets.connect(home=home, pool_size=pool_size)
        try:
            yield mem
        finally:
            mem.close()
            if server is not None:
                server.cleanup()
    finally:  # the store is the run's alone: a 100k-unit one holds ~1.7 GB, and a make bench left 10 behind
        shutil.rmtree(home, ignore_errors=True)


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return time.perf_counter() - start, value


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def median(values):
    return statistics.median(values)


def write_result(name: str, data: dict) -> Path:
    """Write bench/results/<name>.json with the machine it ran on."""
    RESULTS.mkdir(exist_ok=True)
    data = {"benchmark": name, "ran_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()}, **data}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    print(json.dumps(data, indent=2))
    return path
