"""Faults heal by themselves: a killed PostgreSQL server, a killed holder of it, a killed Dagster run, a process
killed in the middle of the ledger fold or the embedding asset. `make test` runs one of each; `make soak` (marker
`soak`) repeats them with more writers, more kills and a bigger corpus, and writes its figures to the faults
section of bench/results/reliability.json."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import date
from pathlib import Path
from typing import Any
from uuid import UUID

import dagster as dg
import numpy as np
import psycopg
import pytest
from psycopg_pool import PoolTimeout

import memory_assets
from memory_assets import database, embeddings
from memory_assets import vocabulary as V
from memory_assets.cli import operate
from memory_assets.defs import runner
from memory_assets.defs.embeddings.assets import unit_embeddings
from memory_assets.defs.ledger.assets import ledger_units
from memory_assets.defs.partitions import model_day_key
from memory_assets.gates import validate
from memory_assets.ledger import capture
from tests.cases import MIGRATION_RECORDS, REPO, SERVING_MODEL, record_reliability

RECOVERY_BOUND_S = 10.0  # "within seconds": a client serves again this soon after its server was killed
embedded_only = pytest.mark.skipif(bool(os.environ.get(V.DATABASE_URL_ENV)),
                                   reason="kills the embedded server; DATABASE_URL names another one")


@pytest.fixture
def home():
    """A private home for a server of the test's own, outside pytest's tmp folders (pytest sessions starting at
    the same time make those unreadable to the server's OS user)."""
    path = Path(tempfile.mkdtemp(prefix="memory_assets_faults_"))
    yield path
    stop_leftover(path / "pg")
    shutil.rmtree(path, ignore_errors=True)


def record(name: str, figures: dict[str, Any]) -> None:
    """Add one soak's figures to the faults section of bench/results/reliability.json (the soak run writes it;
    `make test` writes nothing)."""
    record_reliability("faults", name, figures)


def kill_postmaster(pgdata: Path) -> int:
    """SIGKILL the embedded server's postmaster (its children notice and exit): a crash, not a shutdown."""
    pid = database.postmaster_pid(pgdata)
    assert pid is not None, "no postmaster.pid: the server is not running"
    os.kill(pid, signal.SIGKILL)
    return pid


def stop_leftover(pgdata: Path) -> None:
    """Fast-stop a server a failed test left running, so no postmaster outlives the test session."""
    pid = database.postmaster_pid(pgdata)
    if pid is not None and database.process_alive(pid):
        os.kill(pid, signal.SIGINT)


def fact(writer: int, number: int) -> dict[str, Any]:
    """One distinct, gate-passing candidate."""
    return dict(project="faults", kind="env", type="semantic", title=f"Writer {writer} fact {number}",
                body=f"Service w{writer}n{number} listens on port {1024 + number} because the proxy expects it.",
                task_id=f"T-{writer}-{number}")


# --- 1. The PostgreSQL server is killed under a Memory ----------------------------------------------------------

@embedded_only
@pytest.mark.parametrize("kills, writers", [pytest.param(1, 1, id="short"),
                                            pytest.param(5, 4, id="soak", marks=pytest.mark.soak)])
def test_a_memory_heals_after_its_embedded_server_is_killed(home, kills, writers):
    """SIGKILL of the postmaster during writes: the same Memory object writes and recalls again within seconds
    (its holder restarts the server with crash recovery) and every acknowledged write is there."""
    server = database.embedded_server(home)
    mem = memory_assets.connect(server.get_uri())
    acknowledged: dict[str, tuple[str, float, float]] = {}  # title -> (token, call started, call returned)
    failures: list[tuple[str, float]] = []  # (exception type, when) of calls in flight while the server was down
    unexpected: list[BaseException] = []
    stop = threading.Event()

    def write(writer: int) -> None:
        number = 0
        while not stop.is_set():
            started = time.monotonic()
            try:
                result = mem.remember(**fact(writer, number))
            except (psycopg.OperationalError, PoolTimeout) as error:
                failures.append((type(error).__name__, started))
            except BaseException as error:  # anything else is a bug: the test fails on it
                unexpected.append(error)
                return
            else:
                assert result.status == V.STATUS_ACTIVE and result.token
                acknowledged[fact(writer, number)["title"]] = (result.token, started, time.monotonic())
            number += 1

    threads = [threading.Thread(target=write, args=(w,), daemon=True) for w in range(writers)]
    recoveries: list[float] = []
    try:
        for thread in threads:
            thread.start()
        for _ in range(kills):
            time.sleep(0.5 + random.random())  # writes in flight at a random point
            killed_at = time.monotonic()
            killed = kill_postmaster(home / "pg")
            while database.process_alive(killed):  # backends serve on until they notice; then the crash is real
                time.sleep(0.01)
            dead_at = time.monotonic()
            while not (served := [done for _, started, done in acknowledged.values() if started > dead_at]):
                assert time.monotonic() - killed_at < 3 * RECOVERY_BOUND_S, "no write acknowledged after the kill"
                assert not unexpected, unexpected
                time.sleep(0.05)
            recoveries.append(min(served) - killed_at)
        time.sleep(0.5)
        stop.set()
        for thread in threads:
            thread.join(timeout=3 * RECOVERY_BOUND_S)
        assert not unexpected, unexpected
        assert max(recoveries) < RECOVERY_BOUND_S, recoveries
        # the same object reads again, and nothing it acknowledged is lost (or stored twice)
        for title, (token, _, _) in acknowledged.items():
            unit = mem.unit("faults", token)
            assert unit is not None and unit["title"] == title
        with mem.connection() as conn:
            live = conn.execute("SELECT title, count(*) FROM memory_units WHERE project = 'faults' GROUP BY title "
                                "HAVING count(*) > 1").fetchall()
        assert live == []
        assert mem.recall("faults", "which port does the proxy expect?", k=3, legs="sparse").hits
    finally:
        stop.set()
        mem.close()
        server.cleanup()
        stop_leftover(home / "pg")
    if kills > 1:
        record("server_kill", {"kills": kills, "writers": writers, "acknowledged": len(acknowledged),
                               "acknowledged_lost": 0, "failed_in_flight": len(failures),
                               "recovery_s": {"max": round(max(recoveries), 2),
                                              "median": round(float(np.median(recoveries)), 2)}})


@embedded_only
def test_connect_in_the_same_process_restarts_a_crashed_embedded_server(home):
    """connect() after the server died under this process: it restarts the server (it holds it) instead of
    failing at once on the old socket."""
    first = memory_assets.connect(home=str(home))
    try:
        token = first.remember(**fact(0, 0)).token
        killed = kill_postmaster(home / "pg")
        while database.process_alive(killed):
            time.sleep(0.05)
        again = memory_assets.connect(home=str(home))
        unit = again.unit("faults", token)
        assert unit is not None and unit["title"] == fact(0, 0)["title"]
        again.close()
    finally:
        first.close()
        database.embedded_server(home).cleanup()
        stop_leftover(home / "pg")


@embedded_only
def test_memory_assets_dev_restarts_the_embedded_server_while_dagster_runs(home):
    """`memory-assets dev` holds the server for processes that only attach to it (webserver, daemon, code servers):
    while it waits for `dagster dev` it restarts the server when it crashes."""
    server = database.embedded_server(home)
    try:
        killed = kill_postmaster(home / "pg")
        assert operate.watch(subprocess.Popen(["sleep", "5"]), server.get_uri()) == 0
        assert database.server_running(home / "pg") and database.postmaster_pid(home / "pg") != killed
        with psycopg.connect(server.get_uri()) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        server.cleanup()


def test_memory_assets_dev_passes_a_sigterm_on_to_dagster_as_the_sigint_it_stops_on(clean):
    """Regression (an attacker's pass): a SIGTERM (a supervisor, a plain kill) ended `memory-assets dev` and left
    `dagster dev`, its daemon and webserver running, orphaned, firing schedules and holding the port."""
    child = subprocess.Popen([sys.executable, "-c", "import signal, sys, time\n"
                              "signal.signal(signal.SIGINT, lambda *_: sys.exit(3))\nprint('ready', flush=True)\n"
                              "time.sleep(60)"], stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline() == b"ready\n"
    before = signal.getsignal(signal.SIGTERM)
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM)).start()
    assert operate.watch(child, clean) == 3  # the child stopped on the SIGINT it was passed
    assert signal.getsignal(signal.SIGTERM) is before  # the handler lasts as long as the watch


# --- 2. A holder of the embedded server is killed ---------------------------------------------------------------

HOLDER = ("import sys, time\n"
          "from memory_assets import database\n"
          "database.embedded_server(sys.argv[1])\n"
          "print('attached', flush=True)\n"
          "time.sleep(600)\n")


def attach_holder(home: Path) -> subprocess.Popen[str]:
    """A process that attaches to the embedded server under `home` and then waits to be killed."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(home)], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ), cwd=REPO)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "attached"
    return holder


@embedded_only
def test_a_holder_killed_with_sigkill_does_not_keep_the_server_running(home):
    """One holder killed before this process attaches, one after: the last living holder still stops it."""
    pgdata = home / "pg"
    before = attach_holder(home)
    try:
        before.kill()
        before.wait()
        assert before.pid in json.loads((pgdata / ".handle_pids.json").read_text())  # what pgserver leaves
        server = database.embedded_server(home)
        after = attach_holder(home)
        after.kill()
        after.wait()
        holders = json.loads((pgdata / ".handle_pids.json").read_text())
        assert before.pid not in holders and after.pid in holders and os.getpid() in holders
        server.cleanup()
        assert database.postmaster_pid(pgdata) is None  # stopped: no postmaster.pid left behind
    finally:
        stop_leftover(pgdata)


# --- 3. A Dagster run is killed mid-way -------------------------------------------------------------------------

def test_the_dagster_instance_monitors_runs_and_retries_crashed_ones(database_url, tmp_path):
    """The dagster.yaml runner.dagster_home writes loads with run monitoring (a short poll, start and cancel
    timeouts, a launcher that can tell a dead worker) and run retries on, behind the queued run coordinator."""
    instance = dg.DagsterInstance.from_config(str(runner.dagster_home(database_url, str(tmp_path))))
    assert instance.run_monitoring_enabled
    assert instance.run_monitoring_poll_interval_seconds == V.RUN_MONITORING_POLL_SECONDS <= 10
    assert instance.run_monitoring_start_timeout_seconds == V.RUN_START_TIMEOUT_SECONDS
    assert instance.run_monitoring_cancel_timeout_seconds == V.RUN_CANCEL_TIMEOUT_SECONDS
    assert instance.run_monitoring_max_resume_run_attempts == 0
    assert instance.run_retries_enabled and instance.run_retries_max_retries == V.RUN_MAX_RETRIES > 0
    assert not instance.run_retries_retry_on_asset_or_op_failure
    assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
    assert isinstance(instance.run_launcher, runner.LocalRunLauncher)
    assert instance.run_launcher.supports_check_run_worker_health


SLOW_RUN = ("import time\n"
            "import dagster as dg\n"
            "@dg.asset\n"
            "def slow() -> None:\n"
            "    time.sleep(600)\n"
            "dg.materialize([slow], instance=dg.DagsterInstance.get())\n")


@embedded_only
def test_a_run_killed_mid_way_is_marked_failed_by_the_daemon(home):
    """A run whose process is SIGKILLed while STARTED is marked FAILURE by `dagster-daemon run`'s monitoring
    (so run retries can pick it up), instead of staying STARTED forever."""
    server = database.embedded_server(home)
    dagster_home = runner.dagster_home(server.get_uri(), str(home))
    env = dict(os.environ, DAGSTER_HOME=str(dagster_home))
    daemon = subprocess.Popen([sys.executable, "-m", "dagster._daemon", "run", "--empty-workspace"], env=env,
                              cwd=home, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    worker = subprocess.Popen([sys.executable, "-c", SLOW_RUN], env=env, cwd=home,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        instance = dg.DagsterInstance.from_config(str(dagster_home))
        run = wait_for(lambda: next((r for r in instance.get_runs() if r.status == dg.DagsterRunStatus.STARTED
                                     and runner.run_worker_pid(instance, r.run_id)), None), 60, "a started run")
        assert runner.run_worker_pid(instance, run.run_id) == worker.pid
        worker.kill()
        worker.wait()
        status = wait_for(lambda: (s := instance.get_run_by_id(run.run_id).status) != dg.DagsterRunStatus.STARTED
                          and s, 60, "the daemon to notice")
        assert status == dg.DagsterRunStatus.FAILURE
        instance.dispose()
    finally:
        worker.kill()
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(timeout=30)
        server.cleanup()
        stop_leftover(home / "pg")


# A code location whose one job waits until the test lets it finish: its first run is killed with everything else.
WAITING_JOB = ("from pathlib import Path\n"
               "import time\n"
               "import dagster as dg\n"
               "@dg.op\n"
               "def wait_for_go() -> None:\n"
               "    while not Path(__file__).with_name('go').exists():\n"
               "        time.sleep(0.2)\n"
               "@dg.job\n"
               "def waiting() -> None:\n"
               "    wait_for_go()\n"
               "defs = dg.Definitions(jobs=[waiting])\n")


@embedded_only
@pytest.mark.soak
def test_a_launched_run_killed_with_its_deployment_is_failed_and_retried_when_it_comes_back(home):
    """What `make dev` shut down mid-run leaves: a queued, launched run whose daemon, code server and worker are all
    SIGKILLed. The next daemon marks it failed (run monitoring) and re-executes it (run retries) to success."""
    server = database.embedded_server(home)
    env = dict(os.environ, DAGSTER_HOME=str(runner.dagster_home(server.get_uri(), str(home))))
    code = home / "waiting_job.py"
    code.write_text(WAITING_JOB)
    daemon_command = [sys.executable, "-m", "dagster._daemon", "run", "-f", str(code)]

    def start_daemon() -> subprocess.Popen[bytes]:
        return subprocess.Popen(daemon_command, env=env, cwd=home, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)

    daemon = start_daemon()
    try:
        subprocess.run([sys.executable, "-m", "dagster", "job", "launch", "-f", str(code), "-j", "waiting"],
                       env=env, cwd=home, check=True, capture_output=True, timeout=300)
        instance = dg.DagsterInstance.from_config(env["DAGSTER_HOME"])
        run = wait_for(lambda: next((r for r in instance.get_runs() if r.status == dg.DagsterRunStatus.STARTED
                                     and runner.run_worker_pid(instance, r.run_id)), None), 180, "a launched run")
        os.killpg(daemon.pid, signal.SIGKILL)  # daemon, code server and run worker at once
        daemon.wait()
        (home / "go").touch()
        daemon = start_daemon()
        restarted = time.monotonic()
        wait_for(lambda: instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE, 180,
                 "monitoring to fail the killed run")
        failed = time.monotonic()
        retry = wait_for(lambda: next((r for r in instance.get_runs() if r.parent_run_id == run.run_id
                                       and r.status == dg.DagsterRunStatus.SUCCESS), None), 300,
                         "a retry that succeeds")
        assert retry.tags.get("dagster/retry_number") == "1"
        instance.dispose()
        record("killed_deployment_run", {"failed_after_restart_s": round(failed - restarted, 1),
                                         "retry_succeeded_after_restart_s": round(time.monotonic() - restarted, 1)})
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(timeout=60)
        server.cleanup()


def wait_for(probe: Any, timeout: float, what: str) -> Any:
    """Poll `probe` until it returns something truthy, or fail naming what never happened."""
    deadline = time.monotonic() + timeout
    while not (value := probe()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return value


# --- 4. A process is killed in the middle of the ledger fold or the embedding asset ------------------------------

# Materialise the given steps of a day (ledger, embeddings) in a process of its own, saying when each starts, so the
# test can kill it in the middle of that step.
STEPS = ("import sys\n"
         "from datetime import date\n"
         "from memory_assets import embeddings\n"
         "from memory_assets.defs import runner\n"
         "from memory_assets.defs.embeddings.assets import unit_embeddings\n"
         "from memory_assets.defs.ledger.assets import ledger_units\n"
         "from memory_assets.defs.partitions import model_day_key\n"
         "day, model, url, steps = date.fromisoformat(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]\n"
         "instance = runner.dagster_instance(url)\n"
         "runner.code_location()\n"
         "if 'embeddings' in steps:\n"
         "    embeddings.embedder_for(model)\n"
         "partitions = {'ledger': (ledger_units.key, day.isoformat()),\n"
         "              'embeddings': (unit_embeddings.key, str(model_day_key(model, day)))}\n"
         "for step in steps:\n"
         "    print(step, flush=True)\n"
         "    key, partition = partitions[step]\n"
         "    runner.materialize_asset(key, instance, partition_key=partition)\n"
         "print('done', flush=True)\n")

# The statements that write inside each step's transactions (named queries start with their comment line).
WRITES = {"ledger": ["ledger/fold"],
          "embeddings": ["embeddings/write_vector"]}


# Columns that differ between two correct runs: generated ids, sequence numbers, transaction ids, clock times.
VOLATILE_COLUMNS = {"id", "seq", "xid", "inbox_id", "origin_inbox_id"}
VOLATILE_TYPES = {"timestamp with time zone", "timestamp without time zone", "xid8", "tsvector"}


def corpus(size: int) -> list[Any]:
    """Distinct facts over three projects, every tenth one contributed again by another task (a second source),
    every fiftieth a decision (rejected): what the fold must turn into units, sources and rejections."""
    rows = []
    for number in range(size):
        fields = dict(fact(number % 7, number), project=f"faults-{number % 3}")
        rows.append(validate(**fields))
        if number % 10 == 0:
            rows.append(validate(**dict(fields, task_id=f"T-again-{number}")))
        if number % 50 == 0:
            rows.append(validate(**dict(fields, kind="decision", title=f"Chose {number}")))
    return rows


def load_inbox(url: str, size: int) -> None:
    """Empty the ledger and capture the corpus into the inbox, unfolded: the day's work for the ledger asset."""
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [row[0] for row in conn.execute(
            "SELECT quote_ident(tablename) FROM pg_tables "
            f"WHERE schemaname = 'public' AND tablename NOT IN {MIGRATION_RECORDS}")]
        conn.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
    with psycopg.connect(url, **database.connection_kwargs()) as conn:
        capture.remember_many(conn, corpus(size), fold_now=False)


def materialize(url: str, day: date) -> dict[str, float]:
    """Run the ledger and embedding steps uninterrupted, in this process; their durations in seconds."""
    instance = runner.dagster_instance(url)
    seconds = {}
    for step, key, partition in (("ledger", ledger_units.key, day.isoformat()),
                                 ("embeddings", unit_embeddings.key, str(model_day_key(SERVING_MODEL, day)))):
        started = time.monotonic()
        assert runner.materialize_asset(key, instance, partition_key=partition).success
        seconds[step] = time.monotonic() - started
    return seconds


def kill_during(url: str, day: date, step: str, point: str, window: float) -> dict[str, Any]:
    """Run `step` in a subprocess and SIGKILL it at a random point of it: anywhere in its run (`random`, within the
    reference run's duration), inside one of its write transactions (`transaction`), or once it committed some
    work (`committed`: the fold, or a first page of vectors). What was written by then."""
    process = subprocess.Popen([sys.executable, "-c", STEPS, day.isoformat(), SERVING_MODEL, url, step],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=dict(os.environ),
                               cwd=REPO, start_new_session=True)
    assert process.stdout is not None
    patterns = [database.query(name).splitlines()[0] + "%" for name in WRITES[step]]
    in_transaction = False
    try:
        assert process.stdout.readline().strip() == step, "the subprocess never reached the step"
        started = time.monotonic()
        if point == "random":
            time.sleep(random.uniform(0, window))
        elif point == "committed":
            with psycopg.connect(url, autocommit=True) as watcher:
                table = "memory_inbox WHERE unit_id IS NOT NULL" if step == "ledger" else "memory_embeddings"
                while not watcher.execute(f"SELECT EXISTS (SELECT 1 FROM {table})").fetchone()[0]:
                    assert time.monotonic() - started < 3 * window + 30, f"{step} committed nothing"
                    time.sleep(0.005)
        else:
            with psycopg.connect(url, autocommit=True) as watcher:
                while not in_transaction and time.monotonic() - started < 3 * window + 10:
                    in_transaction = bool(watcher.execute(
                        "SELECT 1 FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND xact_start IS NOT NULL "
                        "AND query LIKE ANY (%s)", (patterns,)).fetchone())
            time.sleep(random.uniform(0, 0.01))
        finished = process.poll() is not None
        delay = time.monotonic() - started
        with contextlib.suppress(ProcessLookupError):  # a random point past the step's end: it exited by itself
            os.killpg(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        process.wait()
    with psycopg.connect(url) as conn:
        folded, vectors = conn.execute("SELECT (SELECT count(*) FROM memory_inbox WHERE unit_id IS NOT NULL), "
                                       "(SELECT count(*) FROM memory_embeddings)").fetchone() or (0, 0)
    return {"step": step, "point": point, "seconds_into_step": round(delay, 3), "in_transaction": in_transaction,
            "exited_before_kill": finished, "inbox_folded_at_kill": folded, "vectors_at_kill": vectors}


def state(url: str) -> dict[str, Any]:
    """Every table but the migrations' records, without volatile columns, unit ids replaced by project#number, rows
    sorted; vectors apart (compared with a tolerance: a page boundary may batch texts differently)."""
    with psycopg.connect(url) as conn:
        names = {row[0]: f"{row[1]}#{row[2]}" for row in conn.execute("SELECT id, project, number FROM memory_units")}
        columns: dict[str, list[str]] = {}
        for table, column, kind in conn.execute(
                "SELECT table_name, column_name, data_type FROM information_schema.columns "
                f"WHERE table_schema = 'public' AND table_name NOT IN {MIGRATION_RECORDS} "
                "AND table_name IN (SELECT tablename FROM pg_tables WHERE schemaname = 'public') "
                "ORDER BY table_name, ordinal_position"):
            if column not in VOLATILE_COLUMNS and kind not in VOLATILE_TYPES and column != "embedding":
                columns.setdefault(table, []).append(column)
        snapshot: dict[str, Any] = {}
        for table, kept in columns.items():
            select = psycopg.sql.SQL("SELECT {} FROM {}").format(
                psycopg.sql.SQL(", ").join(map(psycopg.sql.Identifier, kept)), psycopg.sql.Identifier(table))
            rows = [tuple(names.get(value, value) if isinstance(value, UUID) else value for value in row)
                    for row in conn.execute(select)]
            snapshot[table] = sorted(rows, key=repr)
        snapshot["journal_order"] = [
            (names.get(row[0], row[0]), *row[1:]) for row in conn.execute(
                "SELECT unit_id, revision, status, change FROM memory_changes ORDER BY seq")]
        snapshot["cursor_positions"] = conn.execute(
            "SELECT consumer, (SELECT count(*) FROM memory_changes WHERE seq <= c.seq) FROM memory_cursors c "
            "ORDER BY consumer").fetchall()
        vectors = {(names[unit], model): np.array(json.loads(text), dtype=np.float32) for unit, model, text in
                   conn.execute("SELECT unit_id, model_key, embedding::text FROM memory_embeddings")}
    return {"tables": snapshot, "vectors": vectors}


def assert_same_state(expected: dict[str, Any], actual: dict[str, Any]) -> None:
    """Table by table (a diff names the table), then every vector within cosine 1e-4 of its reference."""
    assert actual["tables"].keys() == expected["tables"].keys()
    for table, rows in expected["tables"].items():
        assert actual["tables"][table] == rows, f"{table} differs after the re-run"
    assert actual["vectors"].keys() == expected["vectors"].keys()
    for key, vector in expected["vectors"].items():
        assert float(np.dot(vector, actual["vectors"][key])) > 1 - 1e-4, key


@pytest.mark.parametrize("size, points", [
    pytest.param(120, ["transaction"], id="short"),
    pytest.param(1300, ["transaction", "committed", "random", "random"], id="soak",
                 marks=[pytest.mark.soak, pytest.mark.timeout(3600)])])
def test_a_process_killed_during_the_ledger_or_the_embedding_asset_leaves_a_state_a_rerun_completes(
        clean, embedder, size, points, today):
    """SIGKILL in the middle of the ledger fold or of the embedding asset, then re-run: units, sources, inbox,
    rejections, vectors, the change journal and its cursors equal those of an uninterrupted run."""
    day = today
    embeddings.embedder_for(embedder.spec.key)  # the reference run times the steps, not the model's loading
    load_inbox(clean, size)
    windows = materialize(clean, day)
    expected = state(clean)
    assert len(expected["vectors"]) >= size  # the reference embedded every unit
    kills = []
    for point in points:
        for step in ("ledger", "embeddings"):
            load_inbox(clean, size)
            if step == "embeddings":  # the fold ran to completion: kill the embedding asset alone
                assert runner.materialize_asset(ledger_units.key, runner.dagster_instance(clean),
                                                partition_key=day.isoformat()).success
            kills.append(kill_during(clean, day, step, point, windows[step]))
            materialize(clean, day)
            assert_same_state(expected, state(clean))
    if len(points) > 1:
        record("kill_during_assets", {"corpus": size, "kills": kills,
                                      "reference_step_s": {k: round(v, 2) for k, v in windows.items()}})
    else:  # the short run must have killed inside the write transactions it means to test
        assert all(kill["in_transaction"] and not kill["exited_before_kill"] for kill in kills), kills
