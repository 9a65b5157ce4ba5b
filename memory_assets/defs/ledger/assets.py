"""The ledger as a daily asset: each day's inbox folded into numbered units."""

from typing import Any

import dagster as dg

from memory_assets import database
from memory_assets import vocabulary as V
from memory_assets.defs.partitions import daily, days_of
from memory_assets.defs.traced import traced_asset
from memory_assets.ledger import capture, units
from memory_assets.resources import PostgresResource


@dg.asset(
    partitions_def=daily,
    group_name=V.ASSET_GROUP_LEDGER,
    kinds={"postgres"},
    backfill_policy=dg.BackfillPolicy.single_run(),
)
@traced_asset
def ledger_units(context: dg.AssetExecutionContext, postgres: PostgresResource) -> dg.MaterializeResult[Any]:
    """Memory units folded from each day's gated inbox rows; re-materialising a day changes nothing."""
    days = days_of(context.partition_time_window)
    totals = {"inserted": 0, "linked": 0, "refused": 0}
    with postgres.memory().connection() as conn:
        for day in days:
            counts = capture.fold_dropping_refused(conn, day=day)
            totals["inserted"] += counts["inserted"]
            totals["linked"] += counts["linked"]
            totals["refused"] += len(counts["refused"])
            context.log.info(f"folded {day}: {counts['inserted']} new units, {counts['linked']} sources")
            if counts["refused"]:
                context.log.warning(f"dropped {len(counts['refused'])} rows of {day} whose unit the database refused: "
                                    f"{sorted(counts['refused'].items())}")
        summary = units.day_summary(conn, days[0], days[-1])
        analyzed = database.refresh_statistics(conn, V.UNITS_TABLE)
    return dg.MaterializeResult(
        metadata={
            "days": len(days),
            "units_inserted": totals["inserted"],
            "sources_linked": totals["linked"],
            "rows_refused": totals["refused"],
            V.STATISTICS_REFRESHED: analyzed,
            "units_by_status": summary["units_by_status"],
            "units_by_kind": summary["units_by_kind"],
            "rejections_by_reason": summary["rejections_by_reason"],
        }
    )
