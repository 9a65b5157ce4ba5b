"""Daily curation after embeddings: merge near-duplicates, send contradictions to review, promote proposals."""

from typing import Any

import dagster as dg

from memory_assets import curation, database, embeddings
from memory_assets import vocabulary as V
from memory_assets.defs.embeddings.assets import unit_embeddings
from memory_assets.defs.partitions import daily, days_of
from memory_assets.defs.traced import traced_asset
from memory_assets.resources import PostgresResource, RerankerResource


@dg.asset(
    partitions_def=daily,
    deps=[dg.AssetDep(unit_embeddings, partition_mapping=dg.MultiToSingleDimensionPartitionMapping("day"))],
    group_name=V.ASSET_GROUP_CURATION,
    kinds={"postgres"},
    backfill_policy=dg.BackfillPolicy.single_run(),
)
@traced_asset
def curated_units(context: dg.AssetExecutionContext, postgres: PostgresResource,
                  reranker: RerankerResource) -> dg.MaterializeResult[Any]:
    """Units of the day curated against older ones by the serving model's vectors; each revision is curated once."""
    totals: dict[str, int] = {}
    with postgres.memory().connection() as conn:
        model = embeddings.serving_model(conn)
        for day in days_of(context.partition_time_window):
            counts = curation.curate_day(conn, model, day, agreement=reranker.agreement())
            context.log.info(f"curated {day}: {counts}")
            totals = {k: totals.get(k, 0) + v for k, v in counts.items()}
        queue = len(curation.review_queue(conn))
        analyzed = database.refresh_statistics(conn, V.UNITS_TABLE)
    return dg.MaterializeResult(metadata={"serving_model": model, **totals, "review_queue": queue,
                                          V.STATISTICS_REFRESHED: analyzed})
