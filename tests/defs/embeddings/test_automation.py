"""The embedding sensor over the change journal: exactly the stale (model, day) partitions, a cursor that never
re-reads a change, run keys that dedupe, one waiting run per partition, and the run it requests keeps recall fresh."""

from datetime import UTC, datetime, timedelta

import dagster as dg

from memory_assets import vocabulary as V
from memory_assets.definitions import defs
from memory_assets.defs import runner
from memory_assets.defs.automation import embedding_sensor, embeddings_job
from memory_assets.defs.embeddings.assets import unit_embeddings
from memory_assets.resources import PostgresResource
from tests.cases import T1, T2


def remember(mem, i, project="acme"):
    return mem.remember(project=project, kind="env", type="semantic", title=f"Service {i} port",
                        body=f"Service {i} listens on port {7000 + i} because the proxy maps it there.")


def tick(mem, instance, cursor=None):
    context = dg.build_sensor_context(resources={"postgres": PostgresResource(database_url=mem.url)},
                                      cursor=cursor, instance=instance)
    return embedding_sensor(context)


def keys(result):
    return sorted(r.partition_key for r in result.run_requests)


def test_the_sensor_requests_exactly_the_stale_partitions_once(mem, conn, today):
    old_day = today - timedelta(days=40)
    instance = dg.DagsterInstance.ephemeral()
    first = tick(mem, instance)
    assert not first.run_requests and first.skip_reason and first.cursor is None  # an empty journal

    old = remember(mem, 1)
    conn.execute("UPDATE memory_units SET created_at = %s WHERE id = %s",
                 (datetime.combine(old_day, datetime.min.time(), tzinfo=UTC), old.unit_id))
    remember(mem, 2)
    result = tick(mem, instance)
    assert keys(result) == sorted([f"{old_day.isoformat()}|{T1}", f"{today.isoformat()}|{T1}"])
    assert all(r.run_key and r.run_key.endswith(f"@{result.cursor}") for r in result.run_requests)

    # the cursor moved past those changes: the next tick reads nothing, whatever was embedded meanwhile
    again = tick(mem, instance, result.cursor)
    assert not again.run_requests and again.cursor is None

    # the old day embedded (what the requested run does): a correction of its unit asks for that day alone
    runner.materialize_asset(unit_embeddings.key, instance, partition_key=f"{old_day.isoformat()}|{T1}")
    runner.materialize_asset(unit_embeddings.key, instance, partition_key=f"{today.isoformat()}|{T1}")
    mem.correct("acme", old.token, body="Service 1 listens on port 7100 because the proxy maps it there.")
    corrected = tick(mem, instance, result.cursor)
    assert keys(corrected) == [f"{old_day.isoformat()}|{T1}"]
    assert corrected.cursor != result.cursor

    # a change whose unit already has a current vector (a vote, a status change) requests nothing
    runner.materialize_asset(unit_embeddings.key, instance, partition_key=f"{old_day.isoformat()}|{T1}")
    conn.execute("UPDATE memory_units SET status = 'flagged' WHERE id = %s", (old.unit_id,))
    quiet = tick(mem, instance, corrected.cursor)
    assert not quiet.run_requests and quiet.cursor and quiet.cursor != corrected.cursor


def test_the_sensor_runs_by_default_and_its_runs_are_limited_as_embedding_work():
    """A new operator finds it running; its runs carry the tag the deployment's queue limits to one at a time."""
    definitions = defs()
    sensor = definitions.resolve_sensor_def(embedding_sensor.name)
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert sensor.minimum_interval_seconds == V.EMBED_SENSOR_INTERVAL_SECONDS
    job = definitions.resolve_job_def(embeddings_job.name)
    assert job.tags[V.RUN_KIND_TAG] == V.RUN_KIND_EMBEDDING and job.executor_def is dg.in_process_executor


def test_the_sensor_follows_the_serving_model(mem, today):
    instance = dg.DagsterInstance.ephemeral()
    remember(mem, 1)
    mem.set_serving_model(T2)
    assert keys(tick(mem, instance)) == [f"{today.isoformat()}|{T2}"]


def test_a_queued_run_of_the_partition_absorbs_new_changes(mem):
    """A burst of writes: while a run of the partition waits to start, later ticks add no run for it."""
    instance = dg.DagsterInstance.ephemeral()
    remember(mem, 1)
    result = tick(mem, instance)
    [request] = result.run_requests
    job = defs().resolve_job_def(embeddings_job.name)
    instance.create_run_for_job(job, status=dg.DagsterRunStatus.NOT_STARTED,
                                tags={**job.tags, "dagster/partition": request.partition_key})
    remember(mem, 2)
    assert not tick(mem, instance, result.cursor).run_requests
    remember(mem, 3, project="other")
    # another project's unit of the same day shares the day partition: absorbed as well
    assert not tick(mem, instance, result.cursor).run_requests
