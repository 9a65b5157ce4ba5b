"""Jobs, schedules and sensors a new operator finds running: fold, embed, lifecycle, consolidation, bundles."""

from datetime import UTC, date, datetime, timedelta

import dagster as dg

from memory_assets import embeddings, journal
from memory_assets import vocabulary as V
from memory_assets.defs.curation.assets import curated_units
from memory_assets.defs.delivery.assets import compiled_bundles, read_rate_metrics
from memory_assets.defs.embeddings.assets import unit_embeddings
from memory_assets.defs.ledger.assets import ledger_units
from memory_assets.defs.lifecycle.assets import consolidation_clusters, decay_scores
from memory_assets.defs.partitions import PROJECTS, daily, model_day_key, model_days, projects, weekly
from memory_assets.ledger import units
from memory_assets.resources import PostgresResource

fold_inbox_job = dg.define_asset_job("fold_inbox", selection=dg.AssetSelection.assets(ledger_units),
                                     partitions_def=daily)
daily_lifecycle_job = dg.define_asset_job(
    "daily_lifecycle", partitions_def=daily,
    selection=dg.AssetSelection.assets(ledger_units, curated_units, decay_scores, read_rate_metrics))
# One step: its run process does the work itself (a step process would import torch and the code location again).
embeddings_job = dg.define_asset_job("embed_day", partitions_def=model_days,
                                     selection=dg.AssetSelection.assets(unit_embeddings),
                                     tags={V.RUN_KIND_TAG: V.RUN_KIND_EMBEDDING}, executor_def=dg.in_process_executor)
consolidation_job = dg.define_asset_job("weekly_consolidation", partitions_def=weekly,
                                        selection=dg.AssetSelection.assets(consolidation_clusters))
bundles_job = dg.define_asset_job("compile_bundles", partitions_def=projects,
                                  selection=dg.AssetSelection.assets(compiled_bundles))


def yesterday(context: dg.ScheduleEvaluationContext) -> str:
    """The UTC day before a tick: schedules name their partition explicitly instead of filling the last window."""
    return (context.scheduled_execution_time.astimezone(UTC) - timedelta(days=1)).date().isoformat()


@dg.sensor(job=fold_inbox_job, minimum_interval_seconds=V.INBOX_SENSOR_INTERVAL_SECONDS,
           default_status=dg.DefaultSensorStatus.RUNNING)
def inbox_sensor(context: dg.SensorEvaluationContext,
                 postgres: PostgresResource) -> dg.SkipReason | list[dg.RunRequest]:
    """Requests a day's ledger partition when that day has unfolded inbox rows (bulk imports land there first)."""
    with postgres.memory().connection() as conn:
        days = units.unfolded_days(conn)
    if not days:
        return dg.SkipReason("no unfolded inbox rows")
    return [dg.RunRequest(run_key=f"{day.isoformat()}:{pending}", partition_key=day.isoformat())
            for day, pending in days]


# Runs that have not started yet read their partition's stale units when they do start.
WAITING = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED]


@dg.sensor(job=embeddings_job, minimum_interval_seconds=V.EMBED_SENSOR_INTERVAL_SECONDS,
           default_status=dg.DefaultSensorStatus.RUNNING)
def embedding_sensor(context: dg.SensorEvaluationContext, postgres: PostgresResource) -> dg.SensorResult:
    """Keeps vectors fresh between daily runs: requests the serving model's (model, day) partitions whose units
    changed since the cursor (a change-journal position) and still lack a current vector, any creation day."""
    with postgres.memory().connection() as conn:
        stale = embeddings.stale_days_since(conn, journal.parse_position(context.cursor))
    if not stale.changes:
        return dg.SensorResult(skip_reason="no unit changed since the last tick")
    cursor = journal.position_text(stale.position)
    first, last = date.fromisoformat(V.PARTITION_START_DATE), datetime.now(UTC).date()
    keys = [str(model_day_key(stale.model, day)) for day in stale.days if first <= day <= last]
    requests = [dg.RunRequest(run_key=f"{key}@{cursor}", partition_key=key) for key in keys
                if not waiting_run(context.instance, key)]
    context.log.info(f"changes={stale.changes} stale_days={len(stale.days)} requested={len(requests)}")
    return dg.SensorResult(run_requests=requests, cursor=cursor,
                           skip_reason=None if requests else f"{stale.changes} changes, nothing to embed")


def waiting_run(instance: dg.DagsterInstance, partition_key: str) -> bool:
    """Whether an embed_day run of the partition is queued and not started: it will embed these units too, so a
    burst of writes costs one queued run per partition instead of one per tick."""
    return bool(instance.get_run_records(dg.RunsFilter(job_name=embeddings_job.name, statuses=WAITING,
                                                       tags={"dagster/partition": partition_key}), limit=1))


@dg.schedule(cron_schedule="10 0 * * *", execution_timezone="UTC", job=embeddings_job,
             default_status=dg.DefaultScheduleStatus.RUNNING)
def daily_embeddings(context: dg.ScheduleEvaluationContext, postgres: PostgresResource) -> dg.RunRequest:
    """00:10 UTC: embed the day that just ended with the serving model (explicitly yesterday's partition)."""
    with postgres.memory().connection() as conn:
        model = embeddings.serving_model(conn)
    key = model_day_key(model, datetime.fromisoformat(yesterday(context)).date())
    return dg.RunRequest(run_key=str(key), partition_key=str(key))


@dg.schedule(cron_schedule="40 0 * * *", execution_timezone="UTC", job=daily_lifecycle_job,
             default_status=dg.DefaultScheduleStatus.RUNNING)
def daily_lifecycle(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    """00:40 UTC: fold, curate, decay and measure the day that just ended (explicitly yesterday's partition)."""
    day = yesterday(context)
    return dg.RunRequest(run_key=day, partition_key=day)


@dg.schedule(cron_schedule="0 2 * * 1", execution_timezone="UTC", job=consolidation_job,
             default_status=dg.DefaultScheduleStatus.RUNNING)
def weekly_consolidation(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    """Mondays 02:00 UTC: consolidate the week that just ended (explicitly last week's partition)."""
    start = (context.scheduled_execution_time.astimezone(UTC) - timedelta(days=7)).date()
    return dg.RunRequest(run_key=start.isoformat(), partition_key=start.isoformat())


@dg.sensor(job=bundles_job, minimum_interval_seconds=300, default_status=dg.DefaultSensorStatus.RUNNING)
def project_sensor(context: dg.SensorEvaluationContext, postgres: PostgresResource) -> dg.SensorResult:
    """Adds a bundle partition for every new project and recompiles bundles whose units changed since last tick."""
    with postgres.memory().connection() as conn:
        changes = units.project_changes(conn)
    known = set(context.instance.get_dynamic_partitions(PROJECTS))
    new = [p for p, _ in changes if p not in known]
    return dg.SensorResult(
        run_requests=[dg.RunRequest(run_key=f"{p}:{seq}", partition_key=p) for p, seq in changes],
        dynamic_partitions_requests=[projects.build_add_request(new)] if new else [],
    )
