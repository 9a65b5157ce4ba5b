"""unit_embeddings and curated_units through Dagster: model x day partitions, backfills, serving-model switch."""

import json
from datetime import UTC, datetime, timedelta

import dagster as dg
from click.testing import CliRunner

from memory_assets import embeddings
from memory_assets.cli import main
from memory_assets.definitions import defs
from memory_assets.defs import runner
from memory_assets.defs.curation.assets import curated_units
from memory_assets.defs.embeddings.assets import unit_embeddings
from tests.cases import T1, T2, indexes_at_each_write, without_model_index


def three_days(today):
    return [today - timedelta(days=2), today - timedelta(days=1), today]


def seed_three_days(mem, conn, today):
    """Two units on each of three days (creation time moved back, as an injected clock would)."""
    for offset, day in enumerate(three_days(today)):
        for i in range(2):
            token = mem.remember(project="acme", kind="env", type="semantic", title=f"Service {offset}-{i} port",
                                 body=f"Service {offset}-{i} listens on port {7000 + 10 * offset + i} "
                                      "because of the proxy.").token
            conn.execute("UPDATE memory_units SET created_at = %s WHERE number = %s",
                         (datetime.combine(day, datetime.min.time(), tzinfo=UTC) + timedelta(hours=3),
                          int(token[4:])))


def run(selection_asset, instance, **kwargs):
    definitions = defs()
    everything = list(definitions.assets) + list(definitions.asset_checks)
    selection = dg.AssetSelection.assets(selection_asset) | dg.AssetSelection.checks_for_assets(selection_asset)
    return dg.materialize(everything, selection=selection, instance=instance, resources=definitions.resources, **kwargs)


def vectors(conn):
    return conn.execute("SELECT model_key, count(*), max(embedded_at) FROM memory_embeddings "
                        "GROUP BY 1 ORDER BY 1").fetchall()


def test_a_second_model_backfilled_over_three_days_coexists_and_serving_switches(mem, conn, today, monkeypatch):
    days = three_days(today)
    seed_three_days(mem, conn, today)
    instance = dg.DagsterInstance.ephemeral()
    for day in days:
        result = run(unit_embeddings, instance, partition_key=f"{day.isoformat()}|{T1}")
        assert result.get_asset_materialization_events()[0].materialization.metadata["written"].value == 2
    # one single-run backfill of the new model over the three day partitions: its vectors written first, its HNSW
    # graph built once over them after the last day
    spec = embeddings.model_spec(T2)
    without_model_index(conn, spec)
    seen = indexes_at_each_write(monkeypatch, spec)
    backfill = run(unit_embeddings, instance, tags={
        "dagster/asset_partition_range_start": f"{days[0].isoformat()}|{T2}",
        "dagster/asset_partition_range_end": f"{days[-1].isoformat()}|{T2}"})
    metadata = backfill.get_asset_materialization_events()[0].materialization.metadata
    assert (metadata["partitions"].value, metadata["written"].value) == (3, 6)
    assert [(m, n) for m, n, _ in vectors(conn)] == [(T1, 6), (T2, 6)]
    assert seen == [[], [], []]
    assert embeddings.model_indexes(conn, embeddings.model_index_prefix(spec)) == [embeddings.model_index_name(spec)]

    # re-materialising a partition writes nothing new
    before = vectors(conn)
    again = run(unit_embeddings, instance, partition_key=f"{days[1].isoformat()}|{T2}")
    assert again.get_asset_materialization_events()[0].materialization.metadata["written"].value == 0
    assert vectors(conn) == before

    # a near-duplicate embedded only by the new model: curation sees it only once that model serves
    dup = mem.remember(project="acme", kind="env", type="semantic", title="Service 2-1 port",
                       body="Service 2-1 listens on port 7021 because of the proxy!").token
    run(unit_embeddings, instance, partition_key=f"{today.isoformat()}|{T2}")
    curated = run(curated_units, instance, partition_key=today.isoformat())
    assert curated.get_asset_materialization_events()[0].materialization.metadata["merged"].value == 0
    assert mem.unit("acme", dup)["status"] == "active"
    mem.set_serving_model(T2)
    curated = run(curated_units, instance, partition_key=today.isoformat())
    metadata = curated.get_asset_materialization_events()[0].materialization.metadata
    assert (metadata["serving_model"].text, metadata["merged"].value) == (T2, 1)
    assert mem.unit("acme", dup)["status"] == "retired"


def test_embeddings_checks_report_coverage_of_the_serving_model(mem, conn, today):
    seed_three_days(mem, conn, today)
    instance = dg.DagsterInstance.ephemeral()
    result = run(unit_embeddings, instance, partition_key=f"{today.isoformat()}|{T1}")
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    current = checks["embeddings_current"]
    assert not current.passed and current.metadata["missing"].value == 4
    assert current.severity == dg.AssetCheckSeverity.ERROR  # 2 of 6 covered: below the floor
    assert checks["embedding_dimensions_consistent"].passed and checks["no_vectors_for_forgotten_units"].passed


def test_cli_backfill_reports_partitions_to_the_ui_instance(mem, conn, today):
    days = three_days(today)
    seed_three_days(mem, conn, today)
    result = CliRunner().invoke(main, ["embed", "--model", T2, "--backfill", "--serve", "--json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["days"], summary["written"], summary["serving"]) == (3, 6, T2)
    instance = runner.dagster_instance(mem.url)
    materialized = instance.get_materialized_partitions(unit_embeddings.key)
    assert {f"{d.isoformat()}|{T2}" for d in days} <= set(materialized)
    again = json.loads(CliRunner().invoke(main, ["embed", "--model", T2, "--backfill", "--json"]).stdout)
    assert again["written"] == 0


def test_cli_review_list_and_decide(mem, conn):
    mem.remember(project="acme", kind="note", type="semantic", title="Low confidence fact",
                 body="The office may move to the new building in May.", confidence=0.4)
    listed = CliRunner().invoke(main, ["review", "list", "--project", "acme", "--json"])
    assert [r["token"] for r in json.loads(listed.stdout)] == ["mem-1"]
    bad = CliRunner().invoke(main, ["review", "decide", "mem-1", "supersede", "--project", "acme"])
    assert bad.exit_code == 2 and "target:" in bad.stderr
    ok = CliRunner().invoke(main, ["review", "decide", "mem-1", "approve", "--project", "acme"])
    assert ok.exit_code == 0 and mem.unit("acme", "mem-1")["status"] == "active"
