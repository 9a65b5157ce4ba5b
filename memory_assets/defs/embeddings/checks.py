"""Checks that vectors describe the current text of every unit, with one dimension per model."""

import dagster as dg

from memory_assets import embeddings
from memory_assets import vocabulary as V
from memory_assets.defs.embeddings.assets import unit_embeddings
from memory_assets.defs.partitions import model_days
from resources import PostgresResource

EMBEDDINGS_CURRENT = "embeddings_current"
DIMENSIONS_CONSISTENT = "embedding_dimensions_consistent"
NO_VECTORS_FOR_FORGOTTEN = "no_vectors_for_forgotten_units"


@dg.asset_check(asset=unit_embeddings, name=EMBEDDINGS_CURRENT, partitions_def=model_days)
def embeddings_current(postgres: PostgresResource) -> dg.AssetCheckResult:
    """Every active unit has a serving-model vector at its current revision: WARN when some miss, ERROR below the floor."""
    with postgres.memory().connection() as conn:
        model = embeddings.serving_model(conn)
        cov = embeddings.coverage(conn, model)
    severity = dg.AssetCheckSeverity.ERROR if cov["share"] < V.EMBEDDINGS_MIN_COVERAGE else dg.AssetCheckSeverity.WARN
    return dg.AssetCheckResult(passed=cov["missing"] == 0, severity=severity,
                               metadata={"serving_model": model, **{k: v for k, v in cov.items() if k != "share"},
                                         "coverage": round(cov["share"], 4)})


@dg.asset_check(asset=unit_embeddings, name=DIMENSIONS_CONSISTENT, blocking=True, partitions_def=model_days)
def embedding_dimensions_consistent(postgres: PostgresResource) -> dg.AssetCheckResult:
    """Each model's vectors all have the model's registered dimension."""
    with postgres.memory().connection() as conn:
        rows = conn.execute("SELECT model_key, array_agg(DISTINCT vector_dims(embedding)) FROM memory_embeddings "
                            "GROUP BY model_key").fetchall()
    wrong = {key: dims for key, dims in rows
             if key not in V.EMBEDDING_MODELS or dims != [V.EMBEDDING_MODELS[key]["dim"]]}
    return dg.AssetCheckResult(passed=not wrong, metadata={"models": len(rows), "inconsistent": wrong})


@dg.asset_check(asset=unit_embeddings, name=NO_VECTORS_FOR_FORGOTTEN, blocking=True, partitions_def=model_days)
def no_vectors_for_forgotten_units(postgres: PostgresResource) -> dg.AssetCheckResult:
    """A forgotten unit keeps no vector in any model."""
    with postgres.memory().connection() as conn:
        ids = [str(r[0]) for r in conn.execute("SELECT DISTINCT e.unit_id FROM memory_embeddings e JOIN memory_units u "
                                               "ON u.id = e.unit_id WHERE u.status = 'forgotten'").fetchall()]
    return dg.AssetCheckResult(passed=not ids, metadata={"units": len(ids), "unit_ids": ids[:50]})
