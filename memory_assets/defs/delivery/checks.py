"""Checks on compiled bundles: caps, no secrets, sanitised titles, schema v1."""

import dagster as dg

from memory_assets import bundle
from memory_assets.defs.delivery.assets import compiled_bundles
from memory_assets.defs.partitions import projects
from memory_assets.quality import bundle_problems
from memory_assets.resources import PostgresResource

__all__ = ["bundle_is_safe", "bundle_problems"]


@dg.asset_check(asset=compiled_bundles, name="bundle_is_safe", blocking=True, partitions_def=projects)
def bundle_is_safe(context: dg.AssetCheckExecutionContext, postgres: PostgresResource) -> dg.AssetCheckResult:
    """The project's latest bundle meets schema v1, the caps, sanitised titles and the secret gate."""
    with postgres.memory().connection() as conn:
        compiled = (bundle.latest_bundle(conn, context.partition_key)
                    or {"v": 1, "project": "", "revision": 0, "units": []})
    problems = bundle_problems(compiled)
    return dg.AssetCheckResult(passed=not problems, metadata={"problems": problems, "units": len(compiled["units"])})
