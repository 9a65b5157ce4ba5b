"""Runs the asset graph in-process (CLI `materialize`, `embed --backfill`, the demo) on the instance the UI shows."""

from __future__ import annotations

import functools
import os
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._core.events import EngineEventData
from dagster._core.launcher import CheckRunHealthResult, WorkerStatus

from memory_assets import database, definitions, embeddings
from memory_assets import vocabulary as V
from memory_assets.defs.curation.assets import curated_units
from memory_assets.defs.delivery.assets import compiled_bundles, read_rate_metrics
from memory_assets.defs.embeddings.assets import unit_embeddings
from memory_assets.defs.ledger.assets import ledger_units
from memory_assets.defs.lifecycle.assets import consolidation_clusters, decay_scores
from memory_assets.defs.partitions import PROJECTS, model_day_key, week_of
from memory_assets.ledger import units
from memory_assets.resources import PostgresResource

DAGSTER_YAML = """\
# Written by memory-assets: Dagster's own storage lives in the memory server's "{database}" database, reached
# through the URL in ${env} (set for memory-assets' own processes and their children, never written to disk).
storage:
  postgres:
    postgres_url:
      env: {env}
telemetry:
  enabled: false
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
# The default launcher plus a worker health check: a run whose process died is marked failed, then retried.
run_launcher:
  module: memory_assets.defs.runner
  class: LocalRunLauncher
run_monitoring:
  enabled: true
  poll_interval_seconds: {poll}
  start_timeout_seconds: {start_timeout}
  cancel_timeout_seconds: {cancel_timeout}
  max_resume_run_attempts: 0
# Crashes are retried (a killed worker, `make dev` shut down mid-run); a failing asset or check is not: it would
# fail the same way again.
run_retries:
  enabled: true
  max_retries: {retries}
  retry_on_asset_or_op_failure: false
"""


class LocalRunLauncher(dg.DefaultRunLauncher):
    """Dagster's default launcher (runs in the code server's processes) that run monitoring can ask about a run's
    worker: a STARTED run whose process on this machine is gone is marked failed instead of staying STARTED."""

    @property
    def supports_check_run_worker_health(self) -> bool:
        """The monitoring daemon calls check_run_worker_health only when this is true."""
        return True

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        """FAILED when the process that runs `run` (the first pid the run recorded) has exited, else RUNNING."""
        pid = run_worker_pid(self._instance, run.run_id)
        if pid is None:  # not recorded yet: never fail a run on missing evidence
            return CheckRunHealthResult(WorkerStatus.RUNNING, "no worker pid recorded yet")
        if database.process_alive(pid):
            return CheckRunHealthResult(WorkerStatus.RUNNING)
        return CheckRunHealthResult(WorkerStatus.FAILED, f"the run's worker process {pid} is gone")


def run_worker_pid(instance: dg.DagsterInstance, run_id: str) -> int | None:
    """The pid of the process that runs `run_id`: a launched run's worker records it first ("Started process for
    run"), an in-process run (CLI `materialize`) its executor ("Executing steps in process")."""
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        data = entry.dagster_event.event_specific_data if entry.dagster_event else None
        pid = data.metadata.get("pid") if isinstance(data, EngineEventData) else None
        if isinstance(pid, dg.TextMetadataValue) and pid.value.isdigit():
            return int(pid.value)
    return None


def dagster_home(url: str, home: str | None = None) -> Path:
    """DAGSTER_HOME under MEMORY_ASSETS_HOME with a dagster.yaml that names no credential: its storage URL (the
    `dagster` database of `url`) is set in this process's environment, which the processes it starts inherit."""
    database.ensure_database(url, V.DAGSTER_DATABASE)
    os.environ[V.DAGSTER_STORAGE_URL_ENV] = database.sqlalchemy_url(url, V.DAGSTER_DATABASE)
    path = database.memory_home(home) / "dagster"
    path.mkdir(exist_ok=True)
    config = DAGSTER_YAML.format(database=V.DAGSTER_DATABASE, env=V.DAGSTER_STORAGE_URL_ENV,
                                 poll=V.RUN_MONITORING_POLL_SECONDS, start_timeout=V.RUN_START_TIMEOUT_SECONDS,
                                 cancel_timeout=V.RUN_CANCEL_TIMEOUT_SECONDS, retries=V.RUN_MAX_RETRIES)
    target = path / "dagster.yaml"
    if not target.exists() or target.read_text() != config:
        target.write_text(config)
    return path


def dagster_instance(url: str, home: str | None = None) -> dg.DagsterInstance:
    """The persistent Dagster instance (runs, event log, schedules) stored next to the memory ledger."""
    return dg.DagsterInstance.from_config(str(dagster_home(url, home)))


def graph_steps(day: date, serving_model: str) -> list[tuple[dg.AssetKey, str]]:
    """The asset graph for one day in dependency order, each asset with the partition that day maps to."""
    return [
        (ledger_units.key, day.isoformat()),
        (unit_embeddings.key, str(model_day_key(serving_model, day))),
        (curated_units.key, day.isoformat()),
        (consolidation_clusters.key, week_of(day).isoformat()),
        (decay_scores.key, day.isoformat()),
        (read_rate_metrics.key, day.isoformat()),
    ]


@functools.cache
def code_location() -> dg.Definitions:
    """The code location's definitions, loaded once per process."""
    return definitions.defs()  # the module, not its function: the defs folder loader would call an imported one


def materialize_day(day: date, instance: dg.DagsterInstance) -> list[dg.ExecuteInJobResult]:
    """Materialise the whole asset graph for one UTC day, with its checks, in this process; one run per asset."""
    postgres: PostgresResource = (code_location().resources or {})["postgres"]
    memory = postgres.memory()
    with memory.connection() as conn:
        serving = embeddings.serving_model(conn)
    results = [materialize_asset(key, instance, partition_key=partition)
               for key, partition in graph_steps(day, serving)]
    # projects are known once the ledger has folded the day: then one bundle per project, as the sensor would
    with memory.connection() as conn:
        names = [project for project, _ in units.project_changes(conn)]
    known = set(instance.get_dynamic_partitions(PROJECTS))
    instance.add_dynamic_partitions(PROJECTS, [p for p in names if p not in known])
    return results + [materialize_asset(compiled_bundles.key, instance, partition_key=p) for p in names]


def materialize_asset(asset_key: dg.AssetKey, instance: dg.DagsterInstance, **kwargs: Any) -> dg.ExecuteInJobResult:
    """Materialise one asset (and its checks) of the code location in this process."""
    definitions = code_location()
    everything = [a for a in definitions.assets or [] if isinstance(a, dg.AssetsDefinition)]
    everything += list(definitions.asset_checks or [])
    selection = dg.AssetSelection.assets(asset_key) | dg.AssetSelection.checks_for_assets(asset_key)
    return dg.materialize(everything, selection=selection, instance=instance, resources=definitions.resources,
                          raise_on_error=True, **kwargs)


def backfill_embeddings(model_key: str, first: date, last: date, instance: dg.DagsterInstance) -> dg.ExecuteInJobResult:
    """One single-run backfill of unit_embeddings for a model over a range of days: what the UI's backfill runs."""
    return materialize_asset(unit_embeddings.key, instance, tags={
        "dagster/asset_partition_range_start": str(model_day_key(model_key, first)),
        "dagster/asset_partition_range_end": str(model_day_key(model_key, last)),
    })
