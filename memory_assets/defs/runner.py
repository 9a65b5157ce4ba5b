"""Runs the asset graph in-process (CLI `materialize`, `embed --backfill`, the demo) on the instance the UI shows."""

from __future__ import annotations

import functools
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg

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
# Written by memory-assets: Dagster's own storage lives in the memory server's "{database}" database.
storage:
  postgres:
    postgres_url: "{url}"
telemetry:
  enabled: false
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
"""


def dagster_home(url: str, home: str | None = None) -> Path:
    """DAGSTER_HOME under MEMORY_ASSETS_HOME with a dagster.yaml pointing at the `dagster` database of `url`."""
    database.ensure_database(url, V.DAGSTER_DATABASE)
    path = database.memory_home(home) / "dagster"
    path.mkdir(exist_ok=True)
    config = DAGSTER_YAML.format(database=V.DAGSTER_DATABASE, url=database.sqlalchemy_url(url, V.DAGSTER_DATABASE))
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
