"""The compose deployment's topology as separate processes on this machine: the database reached only through
DATABASE_URL, the gRPC code server on a port, the webserver and the daemon loading workspace.yaml, all reading the
deployment's dagster.yaml; runs and a backfill launched through the GraphQL API, as an operator's tooling would."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
import yaml
from dagster import DagsterRunStatus
from dagster_graphql import DagsterGraphQLClient
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memory_assets import embeddings
from memory_assets.defs.partitions import model_day_key
from tests.cases import REPO, T1, T2

pytestmark = pytest.mark.timeout(900)  # about 5 min on a quiet machine; a loaded one takes twice that

BIN = Path(sys.executable).parent
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
LOCATION = "memory_assets"
REPOSITORY = "__repository__"  # the name Dagster gives the repository of a @definitions function
# Dagster's storage for this test alone (dropped at the end): runs it stops mid-way and its backfill never reach the
# `dagster` database the other tests' instances share
DAGSTER_DATABASE = "dagster_topology"
STARTUP_S = 90
RUNS_S = 300  # two embedding runs one at a time (the backfill and the sensor's), on a loaded machine
FRESH_S = 60  # issue #14: a new or corrected unit is served by the dense leg this soon while the daemon runs
# One process per run instead of one per step (the executor is each run's choice, not the deployment's): on two
# cores, step processes that each import torch and the code location do not finish in the test's time.
IN_PROCESS = {"execution": {"config": {"in_process": {}}}}
FINISHED = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}
UNITS = [
    ("Staging needs TLS", "Staging requires sslmode=require because the proxy refuses plain TCP."),
    ("Builds need memory", "Release builds need 8 GiB because the linker holds every object in memory."),
    ("Deploys wait for CI", "Deploys must wait for the CI run because the image tag comes from its build."),
]
BACKFILL = """
mutation($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on Error { message }
  }
}"""
BACKFILL_RUNS = """
query($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    __typename
    ... on PartitionBackfill { status runs(limit: 20) { runId status tags { key value } } }
    ... on Error { message }
  }
}"""
LOCATION_STATUS = """
{ workspaceOrError { ... on Workspace { locationEntries { name locationOrLoadError { __typename } } } } }"""
AUTOMATION = """
query($selector: RepositorySelector!) {
  repositoryOrError(repositorySelector: $selector) {
    __typename
    ... on Repository {
      schedules { name scheduleState { status } }
      sensors { name sensorState { status ticks(limit: 1) { status } } }
    }
  }
  instance { daemonHealth { allDaemonStatuses { daemonType required healthy } } }
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def with_option(command: list[str], option: str, value: str) -> list[str]:
    """A compose service's command with one option's value replaced (the address a process listens on)."""
    index = command.index(option)
    return [*command[:index + 1], value, *command[index + 2:]]


def local(command: list[str]) -> list[str]:
    """A compose command run from this virtual environment."""
    return [sys.executable if command[0] == "python" else str(BIN / command[0]), *command[1:]]


class Processes:
    """The deployment's processes, each the leader of its own process group, stopped as groups at the end."""

    def __init__(self, logs: Path, env: dict[str, str]) -> None:
        self.logs, self.env = logs, env
        self.started: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, command: list[str]) -> None:
        # env --default-signal=INT: a shell that started pytest in the background may pass on an ignored SIGINT,
        # and Dagster's processes then ignore SIGTERM too (../shared/ENVIRONMENT.md)
        with open(self.logs / f"{name}.log", "wb") as log:
            self.started[name] = subprocess.Popen(["env", "--default-signal=INT", *command], cwd=REPO, env=self.env,
                                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def check_alive(self) -> None:
        dead = {name: p.returncode for name, p in self.started.items() if p.poll() is not None}
        assert not dead, f"exited: {dead}\n{self.tails()}"

    def tails(self) -> str:
        return "\n".join(f"--- {name}\n{(self.logs / f'{name}.log').read_text(errors='replace')[-3000:]}"
                         for name in self.started)

    def stop(self) -> None:
        """The webserver and the daemon, then the code server (it waits for the calls of its clients to end): SIGTERM
        to each process group, SIGKILL to what is left after a bounded wait."""
        clients = [p for name, p in self.started.items() if name != "user_code"]
        for batch in (clients, [p for name, p in self.started.items() if name == "user_code"]):
            for process in batch:
                signal_group(process.pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            for process in batch:
                while group_alive(process.pid) and time.monotonic() < deadline:
                    process.poll()  # reap the leader; its children keep the group alive until they exit
                    time.sleep(0.2)
                if group_alive(process.pid):  # still ours: a group id is not reused while a member lives
                    signal_group(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the whole group has exited already
        os.killpg(pgid, sig)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def graphql(port: int, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    """One request to the webserver's GraphQL endpoint (queries the Python client has no method for)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", method="POST",
                                     data=json.dumps({"query": query, "variables": variables or {}}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        body = json.loads(response.read())
    assert "errors" not in body, body["errors"]
    return body["data"]  # type: ignore[no-any-return]


def wait_until(processes: Processes, seconds: float, ready: Any, what: str) -> Any:
    """Poll ready() once a second until it returns something truthy, a process dies, or the time is up."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        processes.check_alive()
        result = ready()
        if result:
            return result
        time.sleep(1)
    raise AssertionError(f"{what} not within {seconds} s\n{processes.tails()}")


def code_server_serving(port: int) -> bool:
    """The gRPC health check compose's healthcheck runs (`dagster api grpc-health-check`)."""
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            response = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="DagsterApi"), timeout=5)
    except grpc.RpcError:
        return False
    return bool(response.status == health_pb2.HealthCheckResponse.SERVING)


def automation(port: int) -> dict[str, Any]:
    """The repository's schedules and sensors with their state, and the daemons' health."""
    data = graphql(port, AUTOMATION, {"selector": {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY}})
    assert data["repositoryOrError"]["__typename"] == "Repository", data
    return {**data["repositoryOrError"], "daemons": data["instance"]["daemonHealth"]["allDaemonStatuses"]}


def sensors_ticked(port: int) -> bool:
    """Whether the daemon has evaluated every sensor once (in the code server, through the workspace)."""
    return all(sensor["sensorState"]["ticks"] for sensor in automation(port)["sensors"])


def webserver_up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def deployment_instance(home: Path) -> None:
    """The deployment's dagster.yaml in DAGSTER_HOME, less its DockerRunLauncher block: there is no Docker daemon
    here, so Dagster's default launcher starts each run as a process of the code server instead of a container."""
    config = yaml.safe_load((REPO / "deploy" / "dagster.yaml").read_text())
    del config["run_launcher"]
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))


def deployment_env(url: str, tmp_path: Path, code_port: int) -> dict[str, str]:
    """What compose gives the processes, pointing at the test's server (a Unix socket: libpq reads the folder from
    PGHOST when dagster.yaml's host is empty); MEMORY_ASSETS_HOME is an empty folder, so only DATABASE_URL leads
    to the database."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    home = tmp_path / "dagster_home"
    home.mkdir()
    deployment_instance(home)
    return {**os.environ, "DAGSTER_HOME": str(home), "DATABASE_URL": url,
            "MEMORY_ASSETS_HOME": str(tmp_path / "no_embedded_server"),
            "DAGSTER_POSTGRES_USER": str(info.get("user") or "postgres"),
            "DAGSTER_POSTGRES_PASSWORD": str(info.get("password") or ""),
            "DAGSTER_POSTGRES_HOST": "", "PGHOST": str(info["host"]),
            "DAGSTER_POSTGRES_PORT": str(info.get("port") or 5432), "DAGSTER_POSTGRES_DB": DAGSTER_DATABASE,
            "DAGSTER_COMPUTE_LOG_DIR": str(tmp_path / "compute_logs"),
            "DAGSTER_CODE_SERVER_HOST": "127.0.0.1", "DAGSTER_CODE_SERVER_PORT": str(code_port),
            "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


@pytest.fixture
def topology(mem, tmp_path) -> Iterator[tuple[Processes, DagsterGraphQLClient, int]]:
    """Started in compose's order: the migration, the code server, then (once it is healthy) the webserver and the
    daemon; ready when the location is loaded and the daemon has evaluated every sensor."""
    code_port, web_port = free_port(), free_port()
    env = deployment_env(mem.url, tmp_path, code_port)
    subprocess.run(local(COMPOSE["migrate"]["command"]), env=env, cwd=REPO, check=True, capture_output=True,
                   timeout=120)
    (tmp_path / "logs").mkdir()
    processes = Processes(tmp_path / "logs", env)
    try:
        processes.start("user_code", local(with_option(with_option(COMPOSE["user_code"]["command"], "-h", "127.0.0.1"),
                                                       "-p", str(code_port))))
        wait_until(processes, STARTUP_S, lambda: code_server_serving(code_port), "the code server")
        processes.start("webserver", local(with_option(with_option(COMPOSE["webserver"]["command"], "-h", "127.0.0.1"),
                                                       "-p", str(web_port))))
        processes.start("daemon", local(COMPOSE["daemon"]["command"]))
        wait_until(processes, STARTUP_S, lambda: webserver_up(web_port), "the webserver")
        client = DagsterGraphQLClient("127.0.0.1", port_number=web_port)

        def location_loaded() -> bool:
            [entry] = graphql(web_port, LOCATION_STATUS)["workspaceOrError"]["locationEntries"]
            loaded = (entry["locationOrLoadError"] or {}).get("__typename") == "RepositoryLocation"
            if not loaded:  # the first load failed (the code server was still starting): load it again
                client.reload_repository_location(LOCATION)
            return loaded

        wait_until(processes, STARTUP_S, location_loaded, "the code location")
        wait_until(processes, STARTUP_S, lambda: sensors_ticked(web_port), "the sensors' first ticks")
        yield processes, client, web_port
    finally:
        processes.stop()
        with psycopg.connect(mem.url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {DAGSTER_DATABASE} WITH (FORCE)")
    assert not (tmp_path / "no_embedded_server" / "pg").exists(), "a process started an embedded server"


def dense_served(mem, project: str, token: str, query: str) -> bool:
    """Whether recall serves the unit from the dense leg (a vector of the serving model at its current revision)."""
    return any(hit.token == token and hit.components.get("dense") is not None
               for hit in mem.recall(project, query, k=5))


def seconds_until_dense(processes: Processes, mem, project: str, token: str, query: str, since: float,
                        limit: float) -> float:
    """Seconds from `since` until recall first serves the unit from the dense leg (polled every half second)."""
    deadline = since + limit
    while time.monotonic() < deadline:
        processes.check_alive()
        if dense_served(mem, project, token, query):
            return time.monotonic() - since
        time.sleep(0.5)
    raise AssertionError(f"{token} not served by the dense leg within {limit:.0f} s\n{processes.tails()}")


def test_the_deployment_runs_jobs_and_backfills_through_graphql(topology, mem, embedder, today):
    """With schedules and sensors running, a partitioned ledger run and a two-partition re-embedding backfill,
    launched through the webserver, queued, dequeued by the daemon and run by the code server, succeed; then the
    embedding sensor keeps the dense leg fresh: a new unit of an already materialised day and a corrected unit of
    an older day are served by it within 60 s (issue #14 item 3), with nobody launching a run."""
    processes, client, web_port = topology
    state = automation(web_port)
    assert state["schedules"] and state["sensors"]
    assert {s["name"]: s["scheduleState"]["status"] for s in state["schedules"]} == \
        {s["name"]: "RUNNING" for s in state["schedules"]}
    assert {s["name"]: s["sensorState"]["status"] for s in state["sensors"]} == \
        dict.fromkeys(("embedding_sensor", "inbox_sensor", "project_sensor"), "RUNNING")
    assert all(d["healthy"] for d in state["daemons"] if d["required"]), state["daemons"]

    # written after the sensors' first ticks: the project sensor's bundle run comes only at its next tick (5 min)
    tokens = [mem.remember(project="deploy", kind="env", type="semantic", title=title, body=body,
                           task_id=f"T-{i}").token for i, (title, body) in enumerate(UNITS)]
    assert all(tokens)
    run_id = client.submit_job_execution("fold_inbox", repository_location_name=LOCATION, repository_name=REPOSITORY,
                                         run_config=IN_PROCESS, tags={"dagster/partition": today.isoformat()})
    keys = [str(model_day_key(T2, day)) for day in (today - timedelta(days=1), today)]
    launched = graphql(web_port, BACKFILL, {"params": {
        "partitionNames": keys, "assetSelection": [{"path": ["unit_embeddings"]}], "runConfigData": IN_PROCESS,
        "tags": [{"key": "memory_assets/kind", "value": "embedding"}]}})["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched

    def backfill_runs() -> list[dict[str, Any]]:
        backfill = graphql(web_port, BACKFILL_RUNS, {"id": launched["backfillId"]})["partitionBackfillOrError"]
        assert backfill["__typename"] == "PartitionBackfill", backfill
        return backfill["runs"]  # type: ignore[no-any-return]

    def finished() -> bool:
        runs = backfill_runs()
        return (client.get_run_status(run_id) in FINISHED and bool(runs)
                and all(DagsterRunStatus(r["status"]) in FINISHED for r in runs))

    wait_until(processes, RUNS_S, finished, "the runs")
    assert client.get_run_status(run_id) == DagsterRunStatus.SUCCESS, processes.tails()
    runs = backfill_runs()
    assert {r["status"] for r in runs} == {"SUCCESS"}, processes.tails()
    for run in runs:
        tags = {t["key"]: t["value"] for t in run["tags"]}
        assert tags["memory_assets/kind"] == "embedding" and tags["dagster/backfill"] == launched["backfillId"]
    with mem.connection() as conn:
        embedded = conn.execute("SELECT count(*) FROM memory_embeddings WHERE model_key = %s", (T2,)).fetchone()
    assert embedded == (len(UNITS),)  # the run processes reached the ledger through DATABASE_URL

    # Fresh embeddings. The sensor embedded today's serving-model partition for UNITS already (they were
    # remembered after its first tick); once the dense leg serves them, today's partition is materialised.
    for token, (_, body) in zip(tokens, UNITS, strict=True):
        wait_until(processes, RUNS_S, lambda t=token, q=body: dense_served(mem, "deploy", t, q), f"{token} embedded")
    old_day = today - timedelta(days=30)
    old = mem.remember(project="deploy", kind="env", type="semantic", title="Backups run nightly",
                       body="Backups run at 02:00 because the storage array is idle then.", task_id="T-old")
    with mem.connection() as conn:
        conn.execute("UPDATE memory_units SET created_at = created_at - interval '30 days' WHERE id = %s",
                     (old.unit_id,))
        embeddings.embed_day(conn, embedder, old_day)  # its old day's partition, as that day's run left it
    assert dense_served(mem, "deploy", old.token, "Backups run at 02:00")

    body = "Log rotation keeps 14 days because the audit policy asks for two weeks."
    new = mem.remember(project="deploy", kind="env", type="semantic", title="Logs rotate fortnightly", body=body,
                       task_id="T-new")
    fresh = seconds_until_dense(processes, mem, "deploy", new.token, body, time.monotonic(), FRESH_S)

    corrected = "Backups run at 03:30 because the storage array is idle then."
    mem.correct("deploy", old.token, body=corrected)
    assert not dense_served(mem, "deploy", old.token, corrected)  # its old vector is never served
    refreshed = seconds_until_dense(processes, mem, "deploy", old.token, corrected, time.monotonic(), FRESH_S)
    with mem.connection() as conn:
        rows = conn.execute("SELECT (u.created_at AT TIME ZONE 'UTC')::date, e.unit_revision = u.revision "
                            "FROM memory_units u JOIN memory_embeddings e ON e.unit_id = u.id AND e.model_key = %s "
                            "WHERE u.id = %s", (T1, old.unit_id)).fetchall()
    assert rows == [(old_day, True)]
    print(f"fresh embeddings: new unit {fresh:.1f} s, corrected unit of {old_day} {refreshed:.1f} s "
          f"(bound {FRESH_S} s)")
