"""Vectors per (embedding model, day): a new model is a new partition, re-embedding is a backfill."""

import functools
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
    days_by_model: dict[str, list[date]] = {}
    for key in context.partition_keys:
        dimensions = (key if isinstance(key, dg.MultiPartitionKey) else dg.MultiPartitionKey(key)).keys_by_dimension
        days_by_model.setdefault(dimensions["model"], []).append(date.fromisoformat(dimensions["day"]))
    partitions, done = len(context.partition_keys), 0

    def day_done(model_key: str, day: date, counts: dict[str, int]) -> None:
        nonlocal done
        done += 1
        if counts["embedded"] or done == partitions:
            context.log.info(f"partition {done}/{partitions} {model_key} {day}: {counts}")

    with postgres.memory().connection() as conn, tqdm(desc="embed", unit="unit", disable=None) as bar:
        for model_key, days in sorted(days_by_model.items()):
            counts = embeddings.embed_days(conn, embedder.embedder(model_key), sorted(days), progress=bar.update,
                                           day_done=functools.partial(day_done, model_key))
            totals = {k: totals[k] + counts[k] for k in totals}
    return dg.MaterializeResult(metadata={"partitions": partitions, **totals})
