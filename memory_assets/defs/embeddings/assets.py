"""Vectors per (embedding model, day): a new model is a new partition, re-embedding is a backfill."""

from datetime import date
from typing import Any

import dagster as dg
from tqdm import tqdm

from memory_assets import embeddings
from memory_assets import vocabulary as V
from memory_assets.defs.ledger.assets import ledger_units
from memory_assets.defs.partitions import model_days
from memory_assets.defs.traced import traced_asset
from memory_assets.resources import EmbedderResource, PostgresResource


@dg.asset(
    partitions_def=model_days,
    deps=[dg.AssetDep(ledger_units, partition_mapping=dg.MultiToSingleDimensionPartitionMapping("day"))],
    group_name=V.ASSET_GROUP_EMBEDDINGS,
    kinds={"pgvector", "pytorch"},
    backfill_policy=dg.BackfillPolicy.single_run(),
    pool=V.EMBEDDING_POOL,
)
@traced_asset
def unit_embeddings(context: dg.AssetExecutionContext, postgres: PostgresResource,
                    embedder: EmbedderResource) -> dg.MaterializeResult[Any]:
    """Version-bound vectors of every unit created that day, for that model; re-running writes nothing new."""
    totals = {"embedded": 0, "written": 0}
    keys = sorted((dg.MultiPartitionKey(k) if not isinstance(k, dg.MultiPartitionKey) else k
                   for k in context.partition_keys), key=str)
    with postgres.memory().connection() as conn, tqdm(desc="embed", unit="unit", disable=None) as bar:
        for number, key in enumerate(keys, start=1):
            model_key, day = key.keys_by_dimension["model"], date.fromisoformat(key.keys_by_dimension["day"])
            counts = embeddings.embed_day(conn, embedder.embedder(model_key), day, progress=bar.update)
            totals = {k: totals[k] + counts[k] for k in totals}
            if counts["embedded"] or number == len(keys):
                context.log.info(f"partition {number}/{len(keys)} {model_key} {day}: {counts}")
    return dg.MaterializeResult(metadata={"partitions": len(keys), **totals})
