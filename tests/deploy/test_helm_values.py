"""The Kubernetes values for Dagster's Helm chart (deploy/helm/values.yaml), checked without a cluster: the file
parses, names the variables of .env.example (each one read from the Secret, mapped onto a chart field, or Docker's
alone), hands the code location what compose hands it, keeps deploy/dagster.yaml's run queue, and holds no
credential."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import yaml

from memory_assets import vocabulary as V
from tests.cases import REPO

VALUES = REPO / "deploy" / "helm" / "values.yaml"
ENV_EXAMPLE = REPO / ".env.example"
COMPOSE = REPO / "docker-compose.yml"
DAGSTER_YAML = REPO / "deploy" / "dagster.yaml"
SECRET = "memory-assets"
# .env.example's variables that only the Docker host needs, and why Kubernetes does not
DOCKER_ONLY = {
    "DAGSTER_DOCKER_NETWORK": "the network DockerRunLauncher's containers join; a run is a Job in the namespace",
    "DOCKER_GID": "the group of the Docker socket; the K8sRunLauncher talks to the Kubernetes API",
    "DAGSTER_WEBSERVER_PORT": "a host port; the chart's Service exposes the webserver",
    "POSTGRES_PUBLISHED_PORT": "a host port; the ledger's Service is reached inside the cluster",
    "POSTGRES_SHARED_BUFFERS": "compose's PostgreSQL's page cache; the ledger's server is not part of the chart",
}
# .env.example's variables the chart takes as values rather than from the environment, and where
CHART_FIELDS = {
    "MEMORY_ASSETS_IMAGE": lambda v: "{repository}:{tag}".format(**user_deployment(v)["image"]),
    "DAGSTER_POSTGRES_DB": lambda v: v["postgresql"]["postgresqlDatabase"],
}
CREDENTIAL_KEY = re.compile(r"password|passwd|secret_?key|token|credential", re.IGNORECASE)
URL_WITH_PASSWORD = re.compile(r"://[^/@\s:]+:[^@/\s]+@")


def values() -> dict[str, Any]:
    return yaml.safe_load(VALUES.read_text())


def user_deployment(v: dict[str, Any]) -> dict[str, Any]:
    [deployment] = v["dagster-user-deployments"]["deployments"]
    return deployment


def env_example() -> dict[str, str]:
    lines = [line.strip() for line in ENV_EXAMPLE.read_text().splitlines()]
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def walk(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every (path, scalar) of a parsed YAML document."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from walk(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from walk(value, (*path, i))
    else:
        yield path, node


def test_the_values_parse_into_the_charts_sections():
    v = values()
    assert set(v) <= {"global", "generatePostgresqlPasswordSecret", "postgresql", "dagster-user-deployments",
                      "runLauncher", "dagsterDaemon", "concurrency", "telemetry", "dagsterWebserver"}
    deployment = user_deployment(v)
    assert deployment["codeServerArgs"][:2] == ["-m", "memory_assets.definitions"]
    assert isinstance(deployment["port"], int)
    assert v["runLauncher"]["type"] == "K8sRunLauncher"
    assert v["dagsterDaemon"]["runCoordinator"]["type"] == "QueuedRunCoordinator"
    assert v["postgresql"]["enabled"] is False and v["generatePostgresqlPasswordSecret"] is False


def test_the_values_name_every_variable_of_env_example():
    """Each variable of .env.example is read from the Secret made from .env, or is a chart field holding the same
    value, or is the Docker host's alone (and then not named here); the Secret carries nothing else."""
    v, example = values(), env_example()
    deployment = user_deployment(v)
    from_secret = {ref["key"] for path, ref in _secret_refs(deployment["env"])}
    assert from_secret | set(CHART_FIELDS) | set(DOCKER_ONLY) == set(example), "a variable of .env.example is missing"
    assert not from_secret & (set(CHART_FIELDS) | set(DOCKER_ONLY))
    assert {name: field(v) for name, field in CHART_FIELDS.items()} == {name: example[name] for name in CHART_FIELDS}
    assert v["postgresql"]["postgresqlUsername"] == example["POSTGRES_USER"]  # the same role as compose's storage
    text = VALUES.read_text()
    assert [name for name in DOCKER_ONLY if name in text] == []
    for holder in (deployment["envSecrets"], v["runLauncher"]["config"]["k8sRunLauncher"]["envSecrets"]):
        assert holder == [{"name": SECRET}]


def test_the_code_location_gets_what_compose_gives_it():
    """The variables compose gives the code server and its runs for the application (x-database-env, the trace
    endpoint) are set on the user deployment; Dagster's own (DAGSTER_POSTGRES_*, the code server's address, the
    Docker network) feed deploy/dagster.yaml and workspace.yaml, which the chart writes itself."""
    compose = yaml.safe_load(COMPOSE.read_text())
    application = set(compose["x-database-env"]) | {V.OTEL_ENDPOINT_ENV}
    names = [entry["name"] for entry in user_deployment(values())["env"]]
    assert application <= set(names)
    assert len(names) == len(set(names))
    url = next(e["value"] for e in user_deployment(values())["env"] if e["name"] == V.DATABASE_URL_ENV)
    for reference in re.findall(r"\$\((\w+)\)", url):  # Kubernetes expands only entries defined before
        assert names.index(reference) < names.index(V.DATABASE_URL_ENV)


def test_the_run_queue_is_the_one_of_the_compose_deployment():
    deployment_yaml = yaml.safe_load(DAGSTER_YAML.read_text())
    runs, pools = deployment_yaml["concurrency"]["runs"], deployment_yaml["concurrency"]["pools"]
    daemon = values()["dagsterDaemon"]
    queued = daemon["runCoordinator"]["config"]["queuedRunCoordinator"]
    assert queued["maxConcurrentRuns"] == runs["max_concurrent_runs"]
    assert queued["tagConcurrencyLimits"] == runs["tag_concurrency_limits"]
    assert {"key": V.RUN_KIND_TAG, "value": V.RUN_KIND_EMBEDDING, "limit": 1} in queued["tagConcurrencyLimits"]
    assert values()["concurrency"]["pools"] == {"granularity": pools["granularity"],
                                                "defaultLimit": pools["default_limit"]}
    retries = deployment_yaml["run_retries"]
    assert daemon["runRetries"] == {"enabled": True, "maxRetries": retries["max_retries"],
                                    "retryOnAssetOrOpFailure": retries["retry_on_asset_or_op_failure"]}


def test_no_credential_is_written_in_the_values():
    """Passwords come only from Secrets: no non-empty value under a credential's key, no URL with a password, every
    password variable through secretKeyRef, and .env.example's placeholder password nowhere."""
    v = values()
    literal = [path for path, value in walk(v)
               if isinstance(path[-1], str) and CREDENTIAL_KEY.search(path[-1]) and isinstance(value, str) and value
               and not path[-1].endswith("SecretName")]
    assert literal == []
    assert [value for _, value in walk(v) if isinstance(value, str) and URL_WITH_PASSWORD.search(value)] == []
    for entry in user_deployment(v)["env"]:
        if CREDENTIAL_KEY.search(entry["name"]):
            assert "value" not in entry and entry["valueFrom"]["secretKeyRef"]["name"] == SECRET
    assert env_example()["POSTGRES_PASSWORD"] not in VALUES.read_text()


def _secret_refs(env: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(variable, secretKeyRef) of every env entry read from the memory-assets Secret."""
    for entry in env:
        ref = entry.get("valueFrom", {}).get("secretKeyRef")
        if ref is not None:
            assert ref["name"] == SECRET
            yield entry["name"], ref
