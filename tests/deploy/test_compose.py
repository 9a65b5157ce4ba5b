"""The compose deployment checked without a Docker daemon: Compose's own validation of docker-compose.yml with the
variables of .env.example, the variables themselves, Dagster loading dagster.yaml and workspace.yaml, and the image's
build context."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import dagster as dg
import psycopg
import pytest
import yaml
from dagster._core.run_coordinator import QueuedRunCoordinator
from dagster._core.storage.dagster_run import DagsterRun
from dagster._core.workspace.load import location_origins_from_yaml_paths
from dagster._utils.tags import TagConcurrencyLimitsCounter
from dagster_docker import DockerRunLauncher
from docker.utils.build import exclude_paths

from memory_assets import database, embeddings
from memory_assets import vocabulary as V
from tests.cases import REPO

COMPOSE = REPO / "docker-compose.yml"
ENV_EXAMPLE = REPO / ".env.example"
DAGSTER_YAML = REPO / "deploy" / "dagster.yaml"  # not at the top: Dagster run from the repo root would read it
WORKSPACE = REPO / "workspace.yaml"
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
# services that run Dagster (they read dagster.yaml), and those that also read workspace.yaml
DAGSTER_SERVICES = ("user_code", "webserver", "daemon")
WORKSPACE_SERVICES = ("webserver", "daemon")
# ${NAME}, ${NAME:?message}, ${NAME:-default} (Compose's `$$` escapes a dollar for the container's shell)
INTERPOLATION = re.compile(r"(?<!\$)\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:[?-])?(?P<rest>[^}]*)\}")
BARE_VARIABLE = re.compile(r"(?<!\$)\$(?=[A-Za-z_])")


def env_example() -> dict[str, str]:
    """The variables .env.example lists, as Compose reads them."""
    lines = [line.strip() for line in ENV_EXAMPLE.read_text().splitlines()]
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def compose_text() -> str:
    """docker-compose.yml without its comment lines (Compose interpolates everything else)."""
    return "\n".join(line for line in COMPOSE.read_text().splitlines() if not line.lstrip().startswith("#"))


def compose_variables() -> dict[str, set[str]]:
    """Every variable docker-compose.yml interpolates, with the forms it is written in (':?', ':-' or '')."""
    found: dict[str, set[str]] = {}
    for match in INTERPOLATION.finditer(compose_text()):
        found.setdefault(match["name"], set()).add(match["op"] or "")
    return found


def required_variables() -> list[str]:
    return sorted(name for name, forms in compose_variables().items() if ":?" in forms)


def docker_compose() -> str:
    """Debian's docker-compose (1.29): it validates a compose file without a Docker daemon."""
    binary = shutil.which("docker-compose")
    if binary is None:
        message = "docker-compose is not installed (apt-get install -y docker-compose; .ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return binary


def compose_config(env_file: Path) -> subprocess.CompletedProcess[str]:
    """`docker-compose config` with only the variables of env_file (none inherited from this process)."""
    return subprocess.run([docker_compose(), "--env-file", str(env_file), "-f", str(COMPOSE), "config"],
                          capture_output=True, text=True, env={"PATH": os.environ["PATH"]}, timeout=60)


@pytest.fixture(scope="module")
def resolved() -> dict:
    """The compose file as Compose resolves it with .env.example's values."""
    result = compose_config(ENV_EXAMPLE)
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(line for line in DOCKERFILE.read_text().splitlines()
                                          if not line.lstrip().startswith("#")))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in text.splitlines() if line.strip()]


def image_env() -> dict[str, str]:
    """The ENV the final image sets (every container of the deployment starts from it)."""
    stages = [i for i, (instruction, _) in enumerate(dockerfile_instructions()) if instruction == "FROM"]
    final = dockerfile_instructions()[stages[-1]:]
    pairs = [token.split("=", 1) for instruction, args in final if instruction == "ENV" for token in shlex.split(args)]
    return dict(pairs)


def env_references(node: object) -> set[str]:
    """The names of every `env:` reference in a parsed Dagster YAML file."""
    if isinstance(node, dict):
        if set(node) == {"env"}:
            return {node["env"]}
        return set().union(*(env_references(value) for value in node.values())) if node else set()
    if isinstance(node, list):
        return set().union(*(env_references(value) for value in node)) if node else set()
    return set()


def test_compose_validates_with_the_example_variables(resolved):
    """Compose accepts the file: the database, a one-shot migration, the code server, the webserver, the daemon."""
    services = resolved["services"]
    assert set(services) == {"postgres", "migrate", "user_code", "webserver", "daemon"}
    assert services["postgres"]["image"] == "pgvector/pgvector:pg16"
    assert services["postgres"]["command"] == ["postgres", "-c",
                                               f"shared_buffers={env_example()['POSTGRES_SHARED_BUFFERS']}"]
    code_server = ["dagster", "code-server", "start", "-m", "memory_assets.definitions"]
    assert services["user_code"]["command"][:5] == code_server
    for name in WORKSPACE_SERVICES:
        command = services[name]["command"]
        assert command[command.index("-w") + 1] == "workspace.yaml"
    app = {name: services[name] for name in ("migrate", "user_code", "webserver", "daemon")}
    assert {s["image"] for s in app.values()} == {env_example()["MEMORY_ASSETS_IMAGE"]}
    assert all(s["build"]["context"] == str(REPO) for s in app.values())
    # the run launcher starts runs from the code server's image
    assert services["user_code"]["environment"]["DAGSTER_CURRENT_IMAGE"] == env_example()["MEMORY_ASSETS_IMAGE"]


def test_services_start_in_order_of_health(resolved):
    """Every long-running service has a health check, and each waits for the health of what it needs."""
    services = resolved["services"]
    for name in ("postgres", "user_code", "webserver", "daemon"):
        assert services[name]["healthcheck"]["test"], name
    conditions = {name: {dep: spec["condition"] for dep, spec in s.get("depends_on", {}).items()}
                  for name, s in services.items()}
    assert conditions["migrate"] == {"postgres": "service_healthy"}
    assert conditions["user_code"] == {"postgres": "service_healthy", "migrate": "service_completed_successfully"}
    for name in ("webserver", "daemon"):
        assert conditions[name] == {"postgres": "service_healthy", "migrate": "service_completed_successfully",
                                    "user_code": "service_healthy"}


@pytest.mark.parametrize("name", required_variables())
def test_a_missing_required_variable_fails_validation(name, tmp_path):
    """Leaving out any required variable stops Compose with that variable's message."""
    env_file = tmp_path / "env"
    env_file.write_text("".join(f"{key}={value}\n" for key, value in env_example().items() if key != name))
    result = compose_config(env_file)
    assert result.returncode != 0
    assert f"set {name}" in result.stderr


def test_every_variable_is_listed_in_env_example_and_written_required_or_defaulted():
    """.env.example lists exactly the variables Compose reads; each is ${VAR:?message} or ${VAR:-default}."""
    variables = compose_variables()
    assert set(variables) == set(env_example())
    assert all(forms <= {":?", ":-"} and len(forms) == 1 for forms in variables.values()), variables
    assert {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB", "DAGSTER_POSTGRES_DB", "MEMORY_ASSETS_IMAGE",
            "DAGSTER_DOCKER_NETWORK", "DOCKER_GID"} <= set(required_variables())
    assert not BARE_VARIABLE.search(INTERPOLATION.sub("", compose_text()).replace("$$", ""))


def test_no_credential_is_written_in_a_deployment_file():
    """The storage block takes every connection value from the environment; no file holds the password."""
    storage = yaml.safe_load(DAGSTER_YAML.read_text())["storage"]["postgres"]["postgres_db"]
    assert {key for key, value in storage.items() if not (isinstance(value, dict) and set(value) == {"env"})} \
        == {"scheme"}
    placeholder = env_example()["POSTGRES_PASSWORD"]
    for path in (COMPOSE, DAGSTER_YAML, WORKSPACE, DOCKERFILE):
        assert placeholder not in path.read_text(), path.name


def test_each_dagster_process_gets_every_variable_its_config_reads(resolved):
    """dagster.yaml's and workspace.yaml's env: names are set for each service (or by the image) that reads them,
    and the run launcher forwards only variables the daemon has, so a launch never fails on a missing one."""
    services = resolved["services"]
    instance_names = env_references(yaml.safe_load(DAGSTER_YAML.read_text()))
    workspace_names = env_references(yaml.safe_load(WORKSPACE.read_text()))
    for name in DAGSTER_SERVICES:
        available = set(services[name]["environment"]) | set(image_env())
        assert instance_names <= available, (name, instance_names - available)
    for name in WORKSPACE_SERVICES:
        assert workspace_names <= set(services[name]["environment"]), name
    forwarded = yaml.safe_load(DAGSTER_YAML.read_text())["run_launcher"]["config"]["env_vars"]
    assert set(forwarded) <= set(services["daemon"]["environment"])
    assert {"DATABASE_URL", "PGPASSWORD"} <= set(forwarded)


def test_the_run_containers_share_the_network_and_the_compute_log_volume(resolved):
    """The network the launcher attaches runs to is the compose network; runs write compute logs to the named
    volume the webserver reads, at the folder the image sets as DAGSTER_COMPUTE_LOG_DIR."""
    launcher = yaml.safe_load(DAGSTER_YAML.read_text())["run_launcher"]["config"]
    assert launcher["network"] == {"env": "DAGSTER_DOCKER_NETWORK"}
    network = resolved["services"]["daemon"]["environment"]["DAGSTER_DOCKER_NETWORK"]
    assert [n["name"] for n in resolved["networks"].values()] == [network]
    [volume] = launcher["container_kwargs"]["volumes"]
    name, path = volume.split(":")
    assert resolved["volumes"]["compute_logs"]["name"] == name
    assert path == image_env()["DAGSTER_COMPUTE_LOG_DIR"]
    assert f"compute_logs:{path}:rw" in resolved["services"]["webserver"]["volumes"]


@pytest.fixture
def deployment_env(monkeypatch, database_url, tmp_path):
    """dagster.yaml's variables pointing at the test server (a Unix socket: an empty host lets libpq read PGHOST)."""
    info = psycopg.conninfo.conninfo_to_dict(database_url)
    database.ensure_database(database_url, "dagster")
    values = {"DAGSTER_POSTGRES_USER": str(info.get("user") or "postgres"),
              "DAGSTER_POSTGRES_PASSWORD": str(info.get("password") or ""),
              "DAGSTER_POSTGRES_HOST": "", "PGHOST": str(info["host"]),
              "DAGSTER_POSTGRES_PORT": str(info.get("port") or 5432), "DAGSTER_POSTGRES_DB": "dagster",
              "DAGSTER_DOCKER_NETWORK": "memory_assets_test", "DAGSTER_COMPUTE_LOG_DIR": str(tmp_path / "logs"),
              "DAGSTER_CODE_SERVER_HOST": "user_code", "DAGSTER_CODE_SERVER_PORT": "4000"}
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    return values


def test_the_deployment_instance_loads(deployment_env, tmp_path):
    """Dagster loads dagster.yaml as written: PostgreSQL storage through psycopg2, the queue and its limits, the
    Docker run launcher, run monitoring and retries, telemetry off."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(DAGSTER_YAML, home / "dagster.yaml")
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        assert instance.get_runs(limit=1) is not None  # the storage answers
        assert instance.run_storage.postgres_url.startswith("postgresql+psycopg2://")  # type: ignore[attr-defined]
        assert isinstance(instance.run_coordinator, QueuedRunCoordinator)
        launcher = instance.run_launcher
        assert isinstance(launcher, DockerRunLauncher)
        assert launcher.networks == [deployment_env["DAGSTER_DOCKER_NETWORK"]]
        assert instance.run_monitoring_enabled and instance.run_retries_enabled
        assert instance.run_retries_max_retries == 2
        assert not instance.telemetry_enabled
        queue = instance.get_concurrency_config().run_queue_config
        assert queue is not None and queue.max_concurrent_runs == 4
    finally:
        instance.dispose()


def test_backfills_and_embeddings_cannot_take_every_run_slot(deployment_env, tmp_path):
    """With the queue's limits, a third backfill run or a second embedding run waits, a daily run never does."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(DAGSTER_YAML, home / "dagster.yaml")
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        queue = instance.get_concurrency_config().run_queue_config
    finally:
        instance.dispose()
    assert queue is not None

    def run(**tags: str) -> DagsterRun:
        return DagsterRun(job_name="job", tags=tags)

    embedding_backfill = run(**{"dagster/backfill": "b1", "memory_assets/kind": "embedding"})
    in_progress = [embedding_backfill, run(**{"dagster/backfill": "b2"})]
    counter = TagConcurrencyLimitsCounter(list(queue.tag_concurrency_limits or []), in_progress)
    assert counter.is_blocked(run(**{"dagster/backfill": "b3"}))
    assert counter.is_blocked(run(**{"memory_assets/kind": "embedding", "dagster/schedule_name": "daily_embeddings"}))
    assert not counter.is_blocked(run(**{"dagster/schedule_name": "daily_lifecycle"}))
    assert len(in_progress) + 1 < queue.max_concurrent_runs  # and a slot is left for it


def test_the_workspace_points_at_the_code_server_from_the_environment(deployment_env):
    """workspace.yaml loads one gRPC code location, memory_assets, at the host and port the environment names."""
    [origin] = location_origins_from_yaml_paths([str(WORKSPACE)])
    assert (origin.location_name, origin.host, origin.port) == ("memory_assets", "user_code", 4000)


def test_the_image_is_built_from_the_package_with_cpu_torch_first_as_a_user():
    """The build context holds what the Dockerfile copies and nothing local (.venv, .git, state); CPU torch is
    installed before the project; the deploy extra brings dagster-docker; processes run as a non-root user."""
    patterns = [line.strip() for line in DOCKERIGNORE.read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    context = exclude_paths(str(REPO), patterns)
    instructions = dockerfile_instructions()
    sources = [shlex.split(args)[:-1] for instruction, args in instructions
               if instruction == "COPY" and not args.startswith("--from")]
    for source in (s for group in sources for s in group):
        assert source in context, f"{source} is copied but excluded from the build context"
    assert not {p for p in context if p.split("/")[0] in {".venv", ".git", ".memory_assets", "tests", "bench"}}
    assert not any("__pycache__" in p for p in context)
    runs = [args for instruction, args in instructions if instruction == "RUN"]
    torch = next(i for i, args in enumerate(runs) if "torch==2.13.0" in args)
    project = next(i for i, args in enumerate(runs) if "memory_assets-*.whl" in args)
    assert torch < project and "whl/cpu" in DOCKERFILE.read_text()
    assert "[deploy]" in runs[project]
    users = [args for instruction, args in instructions if instruction == "USER"]
    assert users and users[-1] not in {"root", "0"}
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    dagster_postgres = next(d for d in pyproject["project"]["dependencies"] if d.startswith("dagster-postgres=="))
    release = dagster_postgres.split("==")[1]
    assert f"dagster-docker=={release}" in extras.get("deploy", []), "pyproject needs the deploy extra"
    assert f"dagster-docker=={release}" in extras["dev"], "the dev extra installs it for these tests"
    copies = {shlex.split(args)[-1] for instruction, args in instructions if instruction == "COPY"}
    assert "${DAGSTER_HOME}/dagster.yaml" in copies and "/opt/dagster/app/workspace.yaml" in copies


def test_the_migrate_command_is_python_the_image_can_run(resolved):
    """The migrate service's one-liner compiles (it runs for real in the process-topology test)."""
    command = resolved["services"]["migrate"]["command"]
    assert command[:2] == ["python", "-c"]
    compile(command[2], "migrate", "exec")



def test_the_image_bakes_the_onnx_export_as_its_user_into_a_home_it_owns(tmp_path):
    """Each run's container encodes through the export baked into the image (no torch import, no write to a
    read-only folder): the RUN comes after USER, MEMORY_ASSETS_HOME is created and owned by that user, and the
    command itself, run here, writes the export where memory_assets looks for it."""
    instructions = dockerfile_instructions()
    position = {i: instruction for i, (instruction, _) in enumerate(instructions)}
    bake = next(i for i, (instruction, args) in enumerate(instructions)
                if instruction == "RUN" and "onnx_encoder" in args)
    assert max(i for i, instruction in position.items() if instruction == "USER") < bake
    text = DOCKERFILE.read_text()
    assert "MEMORY_ASSETS_HOME=/opt/dagster/memory" in text
    assert 'chown dagster:dagster "${DAGSTER_HOME}" "${DAGSTER_COMPUTE_LOG_DIR}" "${MEMORY_ASSETS_HOME}"' in text
    command = shlex.split(instructions[bake][1])
    assert command[:2] == ["python", "-c"]
    home = tmp_path / "memory"
    env = {**os.environ, "MEMORY_ASSETS_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    subprocess.run([sys.executable, "-c", command[2]], env=env, check=True, capture_output=True)
    assert embeddings.onnx_file(embeddings.model_spec(V.DEFAULT_SERVING_MODEL), "fp32", home).exists()
