"""Runs the asset graph in-process for one day, on the same Dagster instance the UI shows."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import dagster as dg

from memory_assets import database
from memory_assets import vocabulary as V

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


def daily_assets(definitions: dg.Definitions) -> list:
    """Every asset and asset check of the code location that is partitioned by day."""
    from memory_assets.defs.partitions import daily

    assets = [a for a in definitions.assets or [] if getattr(a, "partitions_def", None) == daily]
    return assets + list(definitions.asset_checks or [])


def materialize_day(day: date, instance: dg.DagsterInstance) -> dg.ExecuteInJobResult:
    """Materialise the whole asset graph for one UTC day, with its checks, in this process."""
    from memory_assets.definitions import defs

    definitions = defs()
    return dg.materialize(
        daily_assets(definitions),
        partition_key=day.isoformat(),
        instance=instance,
        resources=definitions.resources,
        raise_on_error=True,
    )
