"""Checks on compiled bundles: caps, no secrets, sanitised titles, schema v1."""

import json

import dagster as dg

from memory_assets import bundle, gates
from memory_assets import vocabulary as V
from memory_assets.defs.delivery.assets import compiled_bundles
from memory_assets.defs.partitions import projects
from resources import PostgresResource


def bundle_problems(compiled: dict) -> list[str]:
    """Everything wrong with a bundle: schema, caps, unsanitised titles, secrets."""
    problems = []
    if set(compiled) - {"changed"} != {"v", "project", "revision", "units"} or compiled["v"] != V.BUNDLE_VERSION:
        problems.append("schema")
    units = compiled.get("units", [])
    if len(units) > V.BUNDLE_MAX_UNITS:
        problems.append("units cap")
    if len(json.dumps({k: v for k, v in compiled.items() if k != "changed"}).encode()) > V.BUNDLE_MAX_BYTES:
        problems.append("bytes cap")
    if units and sum(u["kind"] == "codemap" for u in units) > V.BUNDLE_MAX_CODEMAP_SHARE * len(units):
        problems.append("codemap share")
    if any(u["title"] != bundle.sanitize_title(u["title"]) for u in units):
        problems.append("unsanitised title")
    if any(gates.has_secret("\n".join([u["title"], *u["paths"], *u["keywords"]])) for u in units):
        problems.append("secret")
    return problems


@dg.asset_check(asset=compiled_bundles, name="bundle_is_safe", blocking=True, partitions_def=projects)
def bundle_is_safe(context: dg.AssetCheckExecutionContext, postgres: PostgresResource) -> dg.AssetCheckResult:
    """The project's latest bundle meets schema v1, the caps, sanitised titles and the secret gate."""
    with postgres.memory().connection() as conn:
        compiled = bundle.latest_bundle(conn, context.partition_key) or {"v": 1, "project": "", "revision": 0, "units": []}
    problems = bundle_problems(compiled)
    return dg.AssetCheckResult(passed=not problems, metadata={"problems": problems, "units": len(compiled["units"])})
