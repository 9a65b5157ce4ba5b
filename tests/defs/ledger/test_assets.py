"""The ledger asset, its checks and its sensor, run through Dagster on the real database."""

import dataclasses
import os
import subprocess
import sys
from datetime import timedelta

import dagster as dg
import psycopg
import pytest

from memory_assets import vocabulary as V
from memory_assets.defs import runner
from memory_assets.defs.automation import inbox_sensor
from memory_assets.defs.ledger.assets import ledger_units
from memory_assets.gates import validate
from memory_assets.ledger import capture
from memory_assets.resources import PostgresResource
from tests.cases import REPO, service_facts, units_counted

TABLES = ("memory_units", "memory_sources", "memory_inbox", "memory_rejections", "memory_projects")


def snapshot(url):
    with psycopg.connect(url) as conn:
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in TABLES}


def candidates():
    facts = [("Staging needs TLS", "Staging requires sslmode=require because the proxy refuses plain TCP."),
             ("Builds need memory", "Release builds need 8 GiB because the linker holds every object.")]
    rows = [validate(project="acme", kind="env", type="semantic", title=t, body=b, task_id=f"T-{i}")
            for i, (t, b) in enumerate(facts)]
    rows.append(validate(project="acme", kind="env", type="semantic", title=facts[0][0], body=facts[0][1],
                         task_id="T-9"))
    rows.append(validate(project="acme", kind="decision", type="semantic", title="Use X", body="We chose X."))
    return rows


def test_materialising_a_day_folds_the_inbox_and_rematerialising_changes_nothing(mem, today):
    with mem.connection() as conn:
        counts = capture.remember_many(conn, candidates(), fold_now=False)
    assert counts["captured"] == 3 and counts["rejected"] == {"decision_kind": 1}
    instance = runner.dagster_instance(mem.url)
    results = runner.materialize_day(today, instance)
    assert all(r.success for r in results)
    metadata = results[0].get_asset_materialization_events()[0].materialization.metadata
    assert metadata["units_inserted"].value == 2 and metadata["sources_linked"].value == 3
    assert metadata["rejections_by_reason"].data == {"decision_kind": 1}
    checks = {e.check_name: e.passed for e in results[0].get_asset_check_evaluations()}
    assert checks == {"no_duplicate_live_units": True, "no_secrets_in_stored_units": True,
                      "private_units_keep_their_audience": True, "ledger_units_expectations": True}
    first = snapshot(mem.url)
    for _ in range(2):
        assert all(r.success for r in runner.materialize_day(today, instance))
        assert snapshot(mem.url) == first


def test_secret_check_fails_on_a_unit_that_bypassed_the_gate(mem):
    mem.remember(project="acme", kind="env", type="semantic", title="Build cache",
                 body="The build cache lives on NFS because local disks are small.")
    with mem.connection() as conn:
        # simulate a writer that bypassed the gate (an old import, a detector added later)
        conn.execute("UPDATE memory_units SET body = body || ' AKIA' || 'Q3ZX7KD4LMNPW2RT'")
        conn.commit()
    from memory_assets.defs.ledger.checks import no_secrets_in_stored_units

    result = no_secrets_in_stored_units(postgres=PostgresResource(database_url=mem.url))
    assert not result.passed and result.metadata["units_with_secrets"].value == 1


@pytest.mark.parametrize("where", ["source_id", "superseded_body"])
def test_secret_check_reads_what_the_gate_read_of_every_unit_holding_text(mem, where):
    """The gate reads a candidate's provenance ids with its text, and a superseded unit is still served as_of: the
    check read only live units' text, so a credential in a source's task id or a superseded body passed it."""
    old = mem.remember(project="acme", kind="env", type="semantic", title="Build cache",
                       body="The build cache lives on NFS because local disks are small.", task_id="T-1")
    from memory_assets.defs.ledger.checks import no_secrets_in_stored_units

    check = lambda: no_secrets_in_stored_units(postgres=PostgresResource(database_url=mem.url))  # noqa: E731
    assert check().passed
    with mem.connection() as conn:  # a writer that bypassed the gate (an old import, a detector added later)
        if where == "source_id":
            conn.execute("UPDATE memory_sources SET task_id = 'AKIA' || 'Q3ZX7KD4LMNPW2RT'")
        else:
            conn.execute("UPDATE memory_units SET body = body || ' AKIA' || 'Q3ZX7KD4LMNPW2RT'")
        conn.commit()
    if where == "superseded_body":
        assert mem.remember(project="acme", kind="env", type="semantic", title="Build cache", supersedes=old.token,
                            body="The build cache lives on local SSDs since 2026.").status == "active"
    result = check()
    assert not result.passed and result.metadata["units_with_secrets"].value == 1


def test_audience_check_fails_when_private_to_drifts_from_the_sources(mem):
    shared = mem.remember(project="acme", kind="env", type="semantic", title="Build cache",
                          body="The build cache lives on NFS because local disks are small.")
    mine = mem.remember(project="acme", kind="env", type="semantic", title="My build cache", persona="ana",
                        visibility="private", body="Ana keeps a second build cache on her laptop's SSD.")
    from memory_assets.defs.ledger.checks import private_units_keep_their_audience

    assert private_units_keep_their_audience(postgres=PostgresResource(database_url=mem.url)).passed
    with mem.connection() as conn:  # a writer that bypassed the write path: one unit opened, one closed
        conn.execute("UPDATE memory_units SET private_to = NULL WHERE id = %s", (mine.unit_id,))
        conn.execute("UPDATE memory_units SET private_to = '{bo}' WHERE id = %s", (shared.unit_id,))
        conn.commit()
    result = private_units_keep_their_audience(postgres=PostgresResource(database_url=mem.url))
    assert not result.passed and sorted(result.metadata["unit_ids"].value) == sorted([mine.unit_id, shared.unit_id])


def test_inbox_sensor_requests_the_days_with_unfolded_rows(mem, today):
    resource = PostgresResource(database_url=mem.url)
    context = dg.build_sensor_context(resources={"postgres": resource})
    assert isinstance(inbox_sensor(context), dg.SkipReason)
    with mem.connection() as conn:
        capture.remember_many(conn, candidates()[:1], fold_now=False)
        # a row younger than the grace is its writer's to fold (remember_many(fold_now=False), then fold_captured)
        assert isinstance(inbox_sensor(dg.build_sensor_context(resources={"postgres": resource})), dg.SkipReason)
        # aged past the grace, the row may fall on the day before `today` (a run in the grace after midnight did)
        day = conn.execute("UPDATE memory_inbox SET received_at = received_at - make_interval(secs => %s) "
                           "RETURNING (received_at AT TIME ZONE 'UTC')::date",
                           (V.INBOX_FOLD_GRACE_SECONDS + 1,)).fetchone()[0]
    assert day in (today, today - timedelta(days=1))
    requests = inbox_sensor(dg.build_sensor_context(resources={"postgres": resource}))
    assert [r.partition_key for r in requests] == [day.isoformat()]


def test_definitions_validate(tmp_path):
    # an instance of its own: without DAGSTER_HOME dagster reads a dagster.yaml in the working directory (the
    # deployment's, which needs the deployment's environment)
    result = subprocess.run([sys.executable, "-m", "dagster", "definitions", "validate",
                             "-m", "memory_assets.definitions"],
                            cwd=REPO, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "DAGSTER_HOME": str(tmp_path)})
    assert result.returncode == 0, result.stdout + result.stderr


def test_embedded_server_reattaches_to_the_same_data_after_restart(tmp_path):
    script = ("import memory_assets, sys; m = memory_assets.connect(home=sys.argv[1]); "
              "r = m.remember(project='p', kind='env', type='semantic', title='Fact', "
              "body='Port 5 is open because of X.');"
              "print(r.status, r.token)")
    runs = [subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True,
                           timeout=120, env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}) for _ in range(2)]
    assert [r.stdout.strip() for r in runs] == ["active mem-1", "duplicate mem-1"], [r.stderr[-500:] for r in runs]
    assert not (tmp_path / "pg" / "postmaster.pid").exists()  # the last holder stopped it


def test_a_fold_past_autovacuums_threshold_refreshes_the_statistics_recall_is_planned_on(mem, today, conn):
    """The day's fold ANALYZEs the units it grew (the planner counts them at once, not at autovacuum's next round);
    re-materialising the same day writes nothing and leaves the statistics alone."""
    with mem.connection() as writer:
        capture.remember_many(writer, service_facts(120), fold_now=False)
    instance = runner.dagster_instance(mem.url)
    refreshed = []
    for _ in range(2):
        result = runner.materialize_asset(ledger_units.key, instance, partition_key=str(today))
        refreshed.append(result.get_asset_materialization_events()[0].materialization.metadata[
            V.STATISTICS_REFRESHED].value)
        assert units_counted(conn) == 120
    assert refreshed == [True, False]


def test_a_day_holding_a_row_the_database_refuses_still_materialises(mem, today, conn):
    """A row past validation whose unit a CHECK refuses, left in the inbox by an import stopped before it dropped
    it, failed every run of its day; the run now folds the day's other rows, drops that row and says so."""
    rows = candidates()
    rows[1] = dataclasses.replace(rows[1], title="x" * 81)  # the second fact; the third is a duplicate of the first
    with mem.connection() as writer:
        capture.remember_many(writer, rows, fold_now=False)
    instance = runner.dagster_instance(mem.url)
    metadata = []
    for _ in range(2):
        result = runner.materialize_asset(ledger_units.key, instance, partition_key=str(today))
        assert result.success
        metadata.append({key: value.value for key, value in
                         result.get_asset_materialization_events()[0].materialization.metadata.items()
                         if key in ("units_inserted", "rows_refused")})
    assert metadata == [{"units_inserted": 1, "rows_refused": 1}, {"units_inserted": 0, "rows_refused": 0}]
    assert units_counted(conn) == 1
