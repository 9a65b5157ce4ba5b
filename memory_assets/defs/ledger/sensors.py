"""Sensors that keep the ledger current without an operator."""

import dagster as dg

from memory_assets import ledger
from memory_assets import vocabulary as V
from memory_assets.defs.ledger.assets import ledger_units
from resources import PostgresResource

fold_inbox_job = dg.define_asset_job("fold_inbox", selection=dg.AssetSelection.assets(ledger_units),
                                     partitions_def=ledger_units.partitions_def)


@dg.sensor(job=fold_inbox_job, minimum_interval_seconds=V.INBOX_SENSOR_INTERVAL_SECONDS,
           default_status=dg.DefaultSensorStatus.RUNNING)
def inbox_sensor(context: dg.SensorEvaluationContext, postgres: PostgresResource):
    """Requests a day's ledger partition when that day has unfolded inbox rows (bulk imports land there first)."""
    with postgres.memory().connection() as conn:
        days = ledger.unfolded_days(conn)
    if not days:
        return dg.SkipReason("no unfolded inbox rows")
    return [dg.RunRequest(run_key=f"{day.isoformat()}:{pending}", partition_key=day.isoformat())
            for day, pending in days]
