"""Data-quality checks on the ledger: no duplicate live unit, no secret, and the day's expectations."""

import dagster as dg

from memory_assets import quality
from memory_assets.defs.ledger.assets import ledger_units
from memory_assets.defs.partitions import daily, days_of
from memory_assets.resources import PostgresResource

NO_DUPLICATE_LIVE_UNITS = "no_duplicate_live_units"
NO_SECRETS_IN_STORED_UNITS = "no_secrets_in_stored_units"
PRIVATE_UNITS_KEEP_THEIR_AUDIENCE = "private_units_keep_their_audience"
LEDGER_EXPECTATIONS = "ledger_units_expectations"


@dg.asset_check(asset=ledger_units, name=NO_DUPLICATE_LIVE_UNITS, blocking=True, partitions_def=daily)
def no_duplicate_live_units(postgres: PostgresResource) -> dg.AssetCheckResult:
    """Proves invariant 4: no two live units share (project, kind, content hash)."""
    with postgres.memory().connection() as conn:
        groups = quality.duplicate_live_units(conn)
    return dg.AssetCheckResult(
        passed=not groups,
        metadata={"duplicate_groups": len(groups), "unit_ids": [str(i) for g in groups for i in g][:50]},
    )


@dg.asset_check(asset=ledger_units, name=NO_SECRETS_IN_STORED_UNITS, blocking=True, partitions_def=daily)
def no_secrets_in_stored_units(postgres: PostgresResource) -> dg.AssetCheckResult:
    """Re-runs the secret gate over every unit holding text, with its sources' ids: a hit means a detector changed or
    a path bypassed the gate."""
    with postgres.memory().connection() as conn:
        offending = quality.units_with_secrets(conn)
    return dg.AssetCheckResult(
        passed=not offending,
        metadata={"units_with_secrets": len(offending), "unit_ids": [str(i) for i in offending[:50]]},
    )


@dg.asset_check(asset=ledger_units, name=PRIVATE_UNITS_KEEP_THEIR_AUDIENCE, blocking=True, partitions_def=daily)
def private_units_keep_their_audience(postgres: PostgresResource) -> dg.AssetCheckResult:
    """Proves recall's visibility filter reads the truth: each live unit's private_to matches its sources."""
    with postgres.memory().connection() as conn:
        wrong = quality.units_with_wrong_audience(conn)
    return dg.AssetCheckResult(passed=not wrong, metadata={"units_with_wrong_audience": len(wrong),
                                                           "unit_ids": wrong[:50]})


@dg.asset_check(asset=ledger_units, name=LEDGER_EXPECTATIONS, partitions_def=daily)
def ledger_units_expectations(context: dg.AssetCheckExecutionContext,
                              postgres: PostgresResource) -> dg.AssetCheckResult:
    """A great-expectations suite over the day's units: provenance present, scores in range, lengths within limits."""
    days = days_of(context.partition_time_window)
    with postgres.memory().connection() as conn:
        frame = quality.units_of_days(conn, days[0], days[-1])
    outcome = quality.validate_units_frame(frame)
    return dg.AssetCheckResult(
        passed=outcome["success"],
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={"units": len(frame), "failed_expectations": outcome["failed"]},
    )
