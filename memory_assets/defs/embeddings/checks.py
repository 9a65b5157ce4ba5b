"""Checks that vectors describe the current text of every unit, with one dimension per model."""

import dagster as dg

from memory_assets import quality
from memory_assets.defs.embeddings.assets import unit_embeddings
from memory_assets.defs.partitions import model_days
from memory_assets.resources import PostgresResource

EMBEDDINGS_CURRENT = "embeddings_current"
DIMENSIONS_CONSISTENT = "embedding_dimensions_consistent"
NO_VECTORS_FOR_FORGOTTEN = "no_vectors_for_forgotten_units"


@dg.asset_check(asset=unit_embeddings, name=EMBEDDINGS_CURRENT, partitions_def=model_days)
def embeddings_current(postgres: PostgresResource) -> dg.AssetCheckResult:
    """Every active unit has a serving-model vector at its revision: WARN when some miss, ERROR below the floor."""
    with postgres.memory().connection() as conn:
        cov = quality.serving_coverage(conn)
    severity = dg.AssetCheckSeverity.ERROR if cov["below_floor"] else dg.AssetCheckSeverity.WARN
    return dg.AssetCheckResult(passed=cov["missing"] == 0, severity=severity,
                               metadata={**{k: v for k, v in cov.items() if k not in ("share", "below_floor")},
                                         "coverage": round(cov["share"], 4)})


@dg.asset_check(asset=unit_embeddings, name=DIMENSIONS_CONSISTENT, blocking=True, partitions_def=model_days)
def embedding_dimensions_consistent(postgres: PostgresResource) -> dg.AssetCheckResult:
    """Each model's vectors all have the model's registered dimension."""
    with postgres.memory().connection() as conn:
        dimensions = quality.embedding_dimensions(conn)
    wrong = quality.wrong_dimensions(dimensions)
    return dg.AssetCheckResult(passed=not wrong, metadata={"models": len(dimensions), "inconsistent": wrong})


@dg.asset_check(asset=unit_embeddings, name=NO_VECTORS_FOR_FORGOTTEN, blocking=True, partitions_def=model_days)
def no_vectors_for_forgotten_units(postgres: PostgresResource) -> dg.AssetCheckResult:
    """A forgotten unit keeps no vector in any model."""
    with postgres.memory().connection() as conn:
        ids = quality.forgotten_units_with_vectors(conn)
    return dg.AssetCheckResult(passed=not ids, metadata={"units": len(ids), "unit_ids": ids[:50]})
