"""Delivery and measurement: per-project bundles safe to inject, and the daily read rate (the kill metric)."""

from typing import Any

import dagster as dg

from memory_assets import analytics, bundle
from memory_assets import vocabulary as V
from memory_assets.defs.lifecycle.assets import decay_scores
from memory_assets.defs.partitions import daily, days_of, projects
from memory_assets.defs.traced import traced_asset
from memory_assets.resources import PostgresResource


@dg.asset(partitions_def=projects, group_name=V.ASSET_GROUP_DELIVERY, kinds={"postgres", "json"},
          deps=[dg.AssetDep(decay_scores, partition_mapping=dg.LastPartitionMapping())])
@traced_asset
def compiled_bundles(context: dg.AssetExecutionContext, postgres: PostgresResource) -> dg.MaterializeResult[Any]:
    """The project's bundle of injectable units (trust, importance, recency; capped); revision rises on change."""
    project = context.partition_key
    with postgres.memory().connection() as conn:
        compiled = bundle.compile_bundle(conn, project)
    return dg.MaterializeResult(metadata={"revision": compiled["revision"], "units": len(compiled["units"]),
                                          "changed": compiled["changed"]})


@dg.asset(partitions_def=daily, deps=[decay_scores], group_name=V.ASSET_GROUP_DELIVERY, kinds={"postgres"},
          backfill_policy=dg.BackfillPolicy.single_run())
@traced_asset
def read_rate_metrics(context: dg.AssetExecutionContext, postgres: PostgresResource) -> dg.MaterializeResult[Any]:
    """Per project, kind, unit and arm: injections, reads, citations, follows, read rate, and the kill list."""
    rows = 0
    with postgres.memory().connection() as conn:
        for day in days_of(context.partition_time_window):
            rows += analytics.compute_read_rate(conn, day)
        killed = len(analytics.kill_list(conn))
    return dg.MaterializeResult(metadata={"rows": rows, "kill_list": killed})
