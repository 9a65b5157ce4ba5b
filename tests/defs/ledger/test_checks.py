"""The ledger's checks judge each unit by its own rule: a forgotten unit's empty text is what forgetting means."""


from memory_assets import authz, quality
from memory_assets.defs import runner
from memory_assets.defs.ledger.assets import ledger_units
from memory_assets.defs.ledger.checks import LEDGER_EXPECTATIONS


def remember(mem, title, body, task_id):
    return mem.remember(project="acme", kind="env", type="semantic", title=title, body=body, task_id=task_id)


def test_the_expectations_pass_on_a_day_that_holds_a_tombstone(mem, today):
    remember(mem, "Build cache", "The build cache lives on NFS because local disks are small.", "T-1")
    gone = remember(mem, "Deploy key", "The deploy key rotates weekly because the auditor asks.", "T-2")
    mem.forget("acme", gone.token, authz.Actor.for_project("acme", "alice", forget=True))
    result = runner.materialize_asset(ledger_units.key, runner.dagster_instance(mem.url), partition_key=str(today))
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert checks[LEDGER_EXPECTATIONS].passed, checks[LEDGER_EXPECTATIONS].metadata


def test_the_expectations_still_fail_on_a_live_unit_without_text_or_a_tombstone_with_text(mem, today):
    remember(mem, "Build cache", "The build cache lives on NFS because local disks are small.", "T-1")
    gone = remember(mem, "Deploy key", "The deploy key rotates weekly because the auditor asks.", "T-2")
    mem.forget("acme", gone.token, authz.Actor.for_project("acme", "alice", forget=True))
    with mem.connection() as conn:
        frame = quality.units_of_days(conn, today, today)
    assert quality.validate_units_frame(frame)["success"]
    blank_live = frame.copy()
    blank_live.loc[blank_live["status"] == "active", "body_chars"] = 0
    assert not quality.validate_units_frame(blank_live)["success"]
    texty_tombstone = frame.copy()
    texty_tombstone.loc[texty_tombstone["status"] == "forgotten", "title_chars"] = 12
    assert not quality.validate_units_frame(texty_tombstone)["success"]
