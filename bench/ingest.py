"""Ingest throughput: remember() with 1 and 8 writers, remember_many() (gates in this process, then in one process
per core), the CLI import of a JSON-lines file (lines/s in the command), and raw COPY of the same rows (the floor).
Also the gates alone per candidate (CPU time), so a slow run can be told apart from a busy machine."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from click.testing import CliRunner

from bench.common import median, scratch_memory, timed, write_result
from memory_assets import database, gates
from memory_assets import vocabulary as V
from memory_assets.api import Memory
from memory_assets.cli import main as cli
from memory_assets.ledger import capture

REMEMBER_WARM_UP = 20  # untimed calls on a new writer's connection first (its statements prepared, its canon read)
TOPICS = ["staging", "build", "deploy", "cache", "queue", "index", "proxy", "backup", "vpn", "linker"]


def fields(i: int, project: str) -> dict:
    topic = TOPICS[i % len(TOPICS)]
    return dict(project=project, kind="env", type="semantic", title=f"{topic} fact {i}",
                body=f"The {topic} service {i} needs {i % 7 + 1} GiB because its working set grows with batch {i}.",
                keywords=[topic], task_id=f"T-{i}", feed="bench")


def candidates(n: int, project: str, offset: int = 0) -> list[gates.Candidate]:
    return [gates.validate(**fields(i, project)) for i in range(offset, offset + n)]


def backend_cpu_ns(conn) -> int | None:
    """CPU time so far, in ns, of the server backend behind a connection, read from /proc where that backend is a
    process of this machine (its working directory the server's data directory); None elsewhere (a remote or
    containerised server, no /proc)."""
    pid, data_directory = conn.execute("SELECT pg_backend_pid(), current_setting('data_directory')").fetchone()
    try:
        if os.readlink(f"/proc/{pid}/cwd") != data_directory:
            return None
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    except OSError:  # another machine's pid, no /proc, or not this user's process
        return None


@contextmanager
def lone_writer(mem, *, unflushed: bool):
    """The store through a one-connection pool, so one writer's every call runs on one known backend; unflushed, that
    session's commits are acknowledged before their WAL reaches the disk (synchronous_commit off for it alone: a
    diagnostic of what a durable call waits for, never how the store runs)."""
    writer = Memory(database.open_pool(mem.url, max_size=1), mem.url)  # the store is migrated: mem's connect did it
    try:
        if unflushed:
            with writer.connection() as conn:
                conn.execute("SET synchronous_commit = off")
        yield writer
        if unflushed:
            with writer.connection() as conn:  # the pool kept its one connection, and the session its setting
                if conn.execute("SHOW synchronous_commit").fetchone()[0] != "off":
                    raise RuntimeError("the unflushed writer's connection was replaced during the run")
    finally:
        writer.close()


def remember_split(mem, project: str, n: int, *, unflushed: bool = False) -> dict[str, float | None]:
    """One writer's remember() calls/s after an untimed warm-up, with the microseconds a call spends on this
    process's CPU, the server backend's CPU (None where it cannot be read) and neither (waiting)."""
    with lone_writer(mem, unflushed=unflushed) as writer:
        remember_rate(writer, f"{project}-warm", REMEMBER_WARM_UP, 1)
        with writer.connection() as conn:
            server_before = backend_cpu_ns(conn)
        client_before = time.process_time()
        rate = remember_rate(writer, project, n, 1)
        client_us = (time.process_time() - client_before) / n * 1e6
        with writer.connection() as conn:
            server_after = backend_cpu_ns(conn)
    server_us = None if server_before is None or server_after is None else (server_after - server_before) / n / 1e3
    return {"rate": rate, "client_cpu": client_us, "server_cpu": server_us,
            "waiting": None if server_us is None else 1e6 / rate - client_us - server_us}


def remember_rate(mem, project: str, n: int, writers: int) -> float:
    """remember() through the public API (validation, kill switch, gates, one pipelined transaction) per unit; one
    writer calls it in this thread, as an agent's loop does (through a one-thread pool each call paid a hand-over
    between two threads: 0.94x in six alternating runs, docs/scaling.md item 21)."""
    rows = [fields(i, project) for i in range(n)]
    if writers == 1:
        seconds, results = timed(lambda: [mem.remember(**f) for f in rows])
    else:
        seconds, results = timed(lambda: list(ThreadPoolExecutor(writers).map(lambda f: mem.remember(**f), rows)))
    assert all(r.token for r in results), results[:3]
    return n / seconds


def remember_many_rate(mem, project: str, n: int, gate_workers: int) -> float:
    rows = candidates(n, project)
    seconds = 0.0
    for start in range(0, n, V.IMPORT_BATCH):
        batch_seconds, counts = timed(mem.remember_many, rows[start:start + V.IMPORT_BATCH], gate_workers=gate_workers)
        assert counts["inserted"] == len(rows[start:start + V.IMPORT_BATCH]), counts
        seconds += batch_seconds
    return n / seconds


def import_rate(mem, project: str, n: int) -> float:
    """The CLI import command in this process (connect, read, validate, gate in parallel, write), lines/s."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as handle:
        for i in range(n):
            handle.write(json.dumps(fields(i, project)) + "\n")
    os.environ["DATABASE_URL"] = mem.url
    try:
        seconds, result = timed(CliRunner().invoke, cli, ["import", handle.name, "--json"], catch_exceptions=False)
    finally:
        del os.environ["DATABASE_URL"]
        os.unlink(handle.name)
    assert result.exit_code == 0 and json.loads(result.stdout)["inserted"] == n, result.output[-500:]
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


def durable_commit_rate(mem, n: int) -> float:
    """One-row INSERTs each committed, into a logged table (a temporary one skips the WAL flush): the floor of any
    single writer whose every acknowledged write must survive a crash."""
    with mem.connection() as conn:
        conn.execute("CREATE TABLE bench_commit_floor (id bigserial PRIMARY KEY, v text)")
        conn.commit()

        def commits():
            for i in range(n):
                conn.execute("INSERT INTO bench_commit_floor (v) VALUES (%s)", (str(i),))
                conn.commit()

        seconds, _ = timed(commits)
        conn.execute("DROP TABLE bench_commit_floor")
        conn.commit()
    return n / seconds


def remember_us(medians: dict[str, float], split: dict[str, list[float]]) -> dict[str, float | None]:
    """A lone writer's call in microseconds (medians over the repeats): wall, this process's CPU, the server
    backend's and the rest (waiting; None where the backend's CPU cannot be read), and what the commit's WAL flush
    adds to the wall (against the unflushed calls)."""
    wall = 1e6 / medians["remember_1"]
    parts = {name: round(median(values), 1) if values else None for name, values in split.items()}
    return {"wall": round(wall, 1), **parts, "flush_wait": round(wall - 1e6 / medians["remember_1_unflushed"], 1)}


def gate_cpu_us(n: int) -> dict[str, float]:
    """CPU microseconds per candidate of the gates, of has_secret and of naming every detector (secret_kinds, what
    has_secret did before its screens): a busy machine stretches wall time, not these."""
    rows = candidates(n, "gates")
    texts = [gates.candidate_text(c) for c in rows]
    gates.gate(rows[0])

    def cpu(fn, items) -> float:
        start = time.thread_time()
        for item in items:
            fn(item)
        return round((time.thread_time() - start) / len(items) * 1e6, 1)

    return {"gate": cpu(gates.gate, rows), "has_secret": cpu(gates.has_secret, texts),
            "secret_kinds": cpu(gates.secret_kinds, texts)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--remember", type=int, default=1000, help="units per remember() run")
    parser.add_argument("--import-size", type=int, default=10_000, help="units per remember_many and import run")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    cores = os.cpu_count() or 1
    runs: dict[str, list[float]] = {"remember_1": [], "remember_1_unflushed": [], "remember_8": [], "remember_many": [],
                                    "remember_many_parallel": [], "import": [], "copy": [], "durable_commit": []}
    load = {"before": [round(x, 2) for x in os.getloadavg()]}
    with scratch_memory() as mem:
        split: dict[str, list[float]] = {"client_cpu": [], "server_cpu": [], "waiting": []}
        for r in range(args.repeats):
            for unflushed in (False, True) if r % 2 == 0 else (True, False):  # alternating: neither always second
                measured = remember_split(mem, f"r1-{r}-{unflushed}", args.remember, unflushed=unflushed)
                runs["remember_1_unflushed" if unflushed else "remember_1"].append(measured.pop("rate"))
                if not unflushed:  # the split of a durable call; the unflushed one's wall is all the diagnostic needs
                    for name, value in measured.items():
                        if value is not None:
                            split[name].append(value)
            runs["remember_8"].append(remember_rate(mem, f"r8-{r}", args.remember, 8))
            runs["remember_many"].append(remember_many_rate(mem, f"rm-{r}", args.import_size, 1))
            runs["remember_many_parallel"].append(remember_many_rate(mem, f"rp-{r}", args.import_size, cores))
            runs["import"].append(import_rate(mem, f"imp-{r}", args.import_size))
            runs["copy"].append(copy_rate(mem, f"cp-{r}", args.import_size))
            runs["durable_commit"].append(durable_commit_rate(mem, args.remember))
    load["after"] = [round(x, 2) for x in os.getloadavg()]
    medians = {k: round(median(v), 1) for k, v in runs.items()}
    write_result("ingest", {
        "units_per_second_median": medians,
        "runs": {k: [round(x, 1) for x in v] for k, v in runs.items()},
        "ratios": {
            "import_vs_raw_copy": round(medians["import"] / medians["copy"], 3),
            "remember_1_vs_durable_commit": round(medians["remember_1"] / medians["durable_commit"], 3),
            "remember_1_vs_unflushed": round(medians["remember_1"] / medians["remember_1_unflushed"], 3),
            "remember_8_vs_1_writers": round(medians["remember_8"] / medians["remember_1"], 3),
            "remember_many_parallel_vs_one_process": round(medians["remember_many_parallel"]
                                                           / medians["remember_many"], 3),
        },
        "remember_1_us_per_call": remember_us(medians, split),
        "gate_cpu_us_per_candidate": gate_cpu_us(min(500, args.import_size)),
        "load_average": load,
        "sizes": {"remember": args.remember, "import": args.import_size, "repeats": args.repeats,
                  "batch": V.IMPORT_BATCH, "gate_workers": cores},
        "note": "remember: the public API, one writer (a loop in the bench's thread) or 8 threads; "
                "remember_1_unflushed: the one writer with its session's synchronous_commit off (a diagnostic: the "
                "commit's WAL flush not awaited); remember_1_us_per_call: the one writer's call split into this "
                "process's CPU, the server backend's and the rest (waiting); remember_many: "
                "batches of IMPORT_BATCH, gates in this process or in one process per core; import: the CLI command "
                "in this process, lines/s (connect, read, validate, parallel gates, COPY, fold); copy: raw COPY of "
                "the same rows; durable_commit: one-row INSERT + COMMIT per write, back to back",
    })


if __name__ == "__main__":
    main()
