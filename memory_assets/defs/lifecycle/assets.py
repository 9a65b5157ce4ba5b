"""Lifecycle assets: daily decay scores and weekly consolidation of episodes."""

from typing import Any

import dagster as dg

from memory_assets import consolidation, database, decay, embeddings
from memory_assets import vocabulary as V
from memory_assets.defs.curation.assets import curated_units
from memory_assets.defs.partitions import daily, days_of, weekly
from memory_assets.defs.traced import traced_asset
from memory_assets.resources import PostgresResource, SummarizerResource


@dg.asset(
    partitions_def=daily,
    deps=[curated_units],
    group_name=V.ASSET_GROUP_LIFECYCLE,
    kinds={"postgres"},
    backfill_policy=dg.BackfillPolicy.single_run(),
)
@traced_asset
def decay_scores(context: dg.AssetExecutionContext, postgres: PostgresResource) -> dg.MaterializeResult[Any]:
    """Per-unit recency, activation, decayed trust and episodic expiry for the day; a re-run gives identical rows."""
    totals: dict[str, int] = {}
    with postgres.memory().connection() as conn:
        for day in days_of(context.partition_time_window):
            counts = decay.score_day(conn, day)
            context.log.info(f"decay {day}: {counts}")
            totals = {k: totals.get(k, 0) + v for k, v in counts.items()}
        analyzed = database.refresh_statistics(conn, V.UNITS_TABLE)
    return dg.MaterializeResult(metadata={**totals, V.STATISTICS_REFRESHED: analyzed})


@dg.asset(
    partitions_def=weekly,
    deps=[curated_units],
    group_name=V.ASSET_GROUP_LIFECYCLE,
    kinds={"postgres", "scikitlearn"},
)
@traced_asset
def consolidation_clusters(context: dg.AssetExecutionContext, postgres: PostgresResource,
                           summarizer: SummarizerResource) -> dg.MaterializeResult[Any]:
    """The week's episodes clustered per project; each cluster becomes one semantic unit linking its members."""
    week_start = context.partition_time_window.start.date()
    with postgres.memory().connection() as conn:
        counts = consolidation.consolidate_week(conn, embeddings.serving_model(conn), week_start,
                                                summarizer=summarizer.summarizer())
        analyzed = database.refresh_statistics(conn, V.UNITS_TABLE)
    context.log.info(f"consolidated week {week_start}: {counts}")
    return dg.MaterializeResult(metadata={**counts, V.STATISTICS_REFRESHED: analyzed})
