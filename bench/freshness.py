"""Time until searchable: from remember() returning to the first recall that serves the unit from the dense leg,
with `memory-assets dev`'s webserver and daemon running (the embedding sensor requests the runs), for new units of
today and for corrected units of an older day; p50/p95 to bench/results/freshness.json."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dagster as dg

from bench.common import median, percentile, write_result
from memory_assets import api, database, embeddings
from memory_assets import vocabulary as V
from memory_assets.defs import runner
from memory_assets.defs.automation import embeddings_job

PROJECT = "freshness"
POLL_S = 0.25


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def webserver_up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=5) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def start_dev(port: int, log: Path) -> subprocess.Popen[bytes]:
    """`memory-assets dev` (webserver, daemon, code server) as the leader of its own process group; env
    --default-signal=INT: a shell that started us in the background may have left SIGINT ignored."""
    with open(log, "wb") as out:
        return subprocess.Popen(["env", "--default-signal=INT", sys.executable, "-m", "memory_assets.cli", "dev",
                                 "--port", str(port)], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def stop_dev(process: subprocess.Popen[bytes]) -> None:
    """SIGINT to the group (what Ctrl-C sends `make dev`), then SIGKILL to whatever is left after a minute."""
    for sig, wait_s in ((signal.SIGINT, 60), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            process.poll()
            try:
                os.killpg(process.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.5)


def dense_served(mem: api.Memory, token: str, query: str) -> bool:
    """Whether recall serves the unit from the dense leg (a serving-model vector at its current revision)."""
    return any(hit.token == token and hit.components.get("dense") is not None
               for hit in mem.recall(PROJECT, query, k=5))


def until_dense(mem: api.Memory, dev: subprocess.Popen[bytes], token: str, query: str, timeout: float) -> float:
    """Seconds from now (remember() or correct() just returned) to the first recall that serves it densely; the
    timeout itself when that takes longer (a censored sample: summary() counts them)."""
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if dev.poll() is not None:
            raise RuntimeError(f"memory-assets dev exited with {dev.returncode}")
        if dense_served(mem, token, query):
            seconds = time.perf_counter() - start
            print(f"{token}: {seconds:.1f} s", file=sys.stderr, flush=True)
            return seconds
        time.sleep(POLL_S)
    print(f"{token}: not within {timeout:.0f} s", file=sys.stderr, flush=True)
    return timeout


def unit_text(n: int) -> tuple[str, str]:
    """A distinct unit per sample (no two dedupe or merge)."""
    words = ["amber", "basil", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper",
             "krypton", "lagoon", "marble", "nectar", "onyx", "prairie", "quartz", "raven", "saffron", "tundra"]
    word = f"{words[n % len(words)]}-{n}"
    return (f"Service {word} port", f"The {word} service listens on port {20000 + n} because the {word} proxy "
                                    f"forwards only that port.")


def run_phases(instance: Any) -> dict[str, float]:
    """Medians over the embed_day runs of this benchmark: queued to started (dequeue, process start, code
    location import) and started to finished (model load, embedding, checks)."""
    records = instance.get_run_records(dg.RunsFilter(job_name=embeddings_job.name))
    launch = [r.start_time - r.create_timestamp.timestamp() for r in records if r.start_time]
    running = [r.end_time - r.start_time for r in records if r.start_time and r.end_time]
    return {"runs": len(records), "queued_to_started_s": round(median(launch), 2) if launch else None,
            "started_to_finished_s": round(median(running), 2) if running else None}


def summary(seconds: list[float], timeout: float) -> dict[str, Any]:
    """p50/p95 over the samples; a sample that reached the timeout counts as the timeout (so p95 is a floor then)."""
    return {"samples": len(seconds), "p50_s": round(median(seconds), 2), "p95_s": round(percentile(seconds, 0.95), 2),
            "max_s": round(max(seconds), 2), "timed_out": sum(s >= timeout for s in seconds),
            "within_60_s": sum(s <= 60 for s in seconds), "seconds": [round(s, 2) for s in seconds]}


def remember(mem: api.Memory, n: int) -> tuple[str, str, str]:
    """Store sample n (active, or the benchmark stops): its token, unit id and body."""
    title, body = unit_text(n)
    result = mem.remember(project=PROJECT, kind="env", type="semantic", title=title, body=body,
                          task_id=f"bench-freshness-{n}")
    if not result.token or not result.unit_id:
        raise RuntimeError(f"sample {n} was not stored: {result.status} {result.reason}")
    return result.token, result.unit_id, body


def measure(mem: api.Memory, dev: subprocess.Popen[bytes], args: argparse.Namespace) -> dict[str, Any]:
    """The cold first unit (daemon, code server and model warming up), new units, then corrected old units."""
    mem.recall(PROJECT, "warm up the query encoder")
    token, _, body = remember(mem, 0)
    cold = until_dense(mem, dev, token, body, args.startup_timeout)
    new: list[float] = []
    for n in range(1, args.samples + 1):
        token, _, body = remember(mem, n)
        new.append(until_dense(mem, dev, token, body, args.timeout))
    # corrections of units of an older day, each first embedded as that day's partition left it
    old_day = datetime.now(UTC).date() - timedelta(days=30)
    embedder = embeddings.embedder_for(mem.serving_model())
    corrected: list[float] = []
    for n in range(1000, 1000 + args.corrections):
        token, unit_id, body = remember(mem, n)
        with mem.connection() as conn:
            conn.execute("UPDATE memory_units SET created_at = created_at - interval '30 days' WHERE id = %s",
                         (unit_id,))
            embeddings.embed_day(conn, embedder, old_day)
        fixed = body.replace("forwards only", "still forwards only")
        mem.correct(PROJECT, token, body=fixed)
        corrected.append(until_dense(mem, dev, token, fixed, args.timeout))
    return {"cold_first_unit_s": round(cold, 2), "new_unit": summary(new, args.timeout),
            "corrected_old_unit": summary(corrected, args.timeout)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark (standalone, or called by a harness with argv) and write bench/results/freshness.json."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=12, help="new units measured one after another")
    parser.add_argument("--corrections", type=int, default=4, help="corrected units of an older day")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a sample may take")
    parser.add_argument("--startup-timeout", type=float, default=300.0, help="seconds the first unit may take")
    args = parser.parse_args(argv)
    load_at_start = round(os.getloadavg()[0], 2)
    # a harness that times us out sends SIGTERM: leave through `finally`, which stops `memory-assets dev`
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    home = tempfile.mkdtemp(prefix="memory_assets_freshness_")
    os.environ[V.HOME_ENV] = home  # `memory-assets dev` and this process share the store under it
    server = None if os.environ.get(V.DATABASE_URL_ENV) else database.embedded_server(home)
    mem = api.connect(home=home)
    port = free_port()
    dev = start_dev(port, Path(home) / "dev.log")
    try:
        deadline = time.monotonic() + args.startup_timeout
        while not webserver_up(port):
            if dev.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("memory-assets dev did not start:\n" + (Path(home) / "dev.log").read_text()[-3000:])
            time.sleep(1)
        results = measure(mem, dev, args)
        instance = runner.dagster_instance(mem.url)
        results["runs"] = run_phases(instance)
        instance.dispose()
    finally:
        stop_dev(dev)
        mem.close()
        if server is not None:
            server.cleanup()
        shutil.rmtree(home, ignore_errors=True)  # the store and the deployment's files are this run's alone
    data = {
        "what": "seconds from remember()/correct() returning to the first recall served by the dense leg, with "
                "`memory-assets dev` (webserver + daemon) running; one sample at a time",
        "sensor_interval_s": V.EMBED_SENSOR_INTERVAL_SECONDS,
        "poll_s": POLL_S,
        "load_average_1m": {"start": load_at_start, "end": round(os.getloadavg()[0], 2)},
        **results,
    }
    write_result("freshness", data)
    return data


if __name__ == "__main__":
    main()
