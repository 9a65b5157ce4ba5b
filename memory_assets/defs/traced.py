"""One span per asset materialisation, for every asset: its key, run, partitions and the counts it reports."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, cast

import dagster as dg

from memory_assets import tracing

P = ParamSpec("P")
AssetBody = Callable[Concatenate[dg.AssetExecutionContext, P], dg.MaterializeResult[Any]]
TRACED = "__memory_assets_traced__"  # set on every wrapped body: tests/test_tracing.py checks each asset has it


def partition_attributes(context: dg.AssetExecutionContext) -> dict[str, tracing.Value]:
    """The partition key of a run (model|day, day, week or project), or the first and last of a backfill range."""
    if context.has_partition_key:
        return {"partition_key": str(context.partition_key), "partitions": 1}
    if context.has_partition_key_range:
        keys = context.partition_key_range
        return {"partition_start": str(keys.start), "partition_end": str(keys.end),
                "partitions": len(context.partition_keys)}
    return {}


def counts(metadata: object) -> dict[str, tracing.Value]:
    """The numbers among an asset's metadata (units inserted, vectors written, …): no dicts, lists or names."""
    found: dict[str, tracing.Value] = {}
    for key, value in (metadata or {}).items() if isinstance(metadata, dict) else ():
        raw = value.value if isinstance(value, (dg.IntMetadataValue, dg.FloatMetadataValue,
                                                dg.BoolMetadataValue)) else value
        if isinstance(raw, (int, float, bool)):
            found[str(key)] = raw
    return found


def traced_asset(body: AssetBody[P]) -> AssetBody[P]:
    """Wrap an asset body (under @dg.asset) in a span named asset.<name>; Dagster still sees the body's signature."""
    @functools.wraps(body)
    def run(context: dg.AssetExecutionContext, *args: P.args, **kwargs: P.kwargs) -> dg.MaterializeResult[Any]:
        tracing.configure("dagster")
        try:
            with tracing.span(f"asset.{body.__name__}", asset_key=context.asset_key.to_user_string(),
                              run_id=context.run_id, **partition_attributes(context)) as span:
                result = body(context, *args, **kwargs)
                tracing.record(span, **counts(result.metadata))
            return result
        finally:
            tracing.flush()
    setattr(run, TRACED, True)
    return cast(AssetBody[P], run)  # mypy types functools.wraps' result as its own wrapper type
