"""Ingest throughput: remember() with 1 and 8 writers, bulk import of 10k candidates, and raw COPY of the same rows."""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import median, scratch_memory, timed, write_result
from memory_assets import gates
from memory_assets import vocabulary as V
from memory_assets.ledger import capture

TOPICS = ["staging", "build", "deploy", "cache", "queue", "index", "proxy", "backup", "vpn", "linker"]


def candidates(n: int, project: str, offset: int = 0) -> list[gates.Candidate]:
    rows = []
    for i in range(offset, offset + n):
        topic = TOPICS[i % len(TOPICS)]
        rows.append(gates.validate(
            project=project, kind="env", type="semantic", title=f"{topic} fact {i}",
            body=f"The {topic} service {i} needs {i % 7 + 1} GiB because its working set grows with batch {i}.",
            keywords=[topic], task_id=f"T-{i}", feed="bench"))
    return rows


def remember_rate(mem, project: str, n: int, writers: int) -> float:
    rows = candidates(n, project)

    def write(candidate):
        with mem.connection() as conn:
            return capture.remember(conn, candidate)

    seconds, _ = timed(lambda: list(ThreadPoolExecutor(writers).map(write, rows)))
    return n / seconds


def import_rate(mem, project: str, n: int) -> float:
    rows = candidates(n, project)
    with mem.connection() as conn:
        seconds, counts = timed(capture.remember_many, conn, rows)
    assert counts["inserted"] == n, counts
    return n / seconds


def copy_rate(mem, project: str, n: int) -> float:
    """Raw COPY of the same inbox rows into a bare table of the same shape: the floor of any ingest path."""
    rows = [capture.inbox_row(c) for c in candidates(n, project)]
    columns = ", ".join(V.INBOX_COLUMNS)
    with mem.connection() as conn:
        conn.execute("CREATE TEMP TABLE raw_copy (LIKE memory_inbox INCLUDING DEFAULTS)")

        def copy():
            with conn.cursor().copy(f"COPY raw_copy ({columns}) FROM STDIN") as cp:
                for row in rows:
                    cp.write_row(row)

        seconds, _ = timed(copy)
        conn.execute("DROP TABLE raw_copy")
        conn.commit()
    return n / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--remember", type=int, default=500, help="units per remember() run")
    parser.add_argument("--import-size", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results = {"remember_1": [], "remember_8": [], "import": [], "copy": []}
    with scratch_memory() as mem:
        for r in range(args.repeats):
            results["remember_1"].append(remember_rate(mem, f"r1-{r}", args.remember, 1))
            results["remember_8"].append(remember_rate(mem, f"r8-{r}", args.remember, 8))
            results["import"].append(import_rate(mem, f"imp-{r}", args.import_size))
            results["copy"].append(copy_rate(mem, f"cp-{r}", args.import_size))
    medians = {k: round(median(v), 1) for k, v in results.items()}
    write_result("ingest", {
        "units_per_second_median": medians,
        "runs": {k: [round(x, 1) for x in v] for k, v in results.items()},
        "ratios": {
            "import_vs_raw_copy": round(medians["import"] / medians["copy"], 3),
            "remember_8_vs_1_writers": round(medians["remember_8"] / medians["remember_1"], 3),
        },
        "sizes": {"remember": args.remember, "import": args.import_size, "repeats": args.repeats},
        "note": "import includes validation, the exclusion and secret gates, inbox capture and the set-based fold",
    })


if __name__ == "__main__":
    main()
