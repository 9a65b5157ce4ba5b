"""The command line: bad input exits 2 with the field and limit on stderr; import reports bad lines by number."""

import dataclasses
import itertools
import json
import os
import subprocess
import sys
import threading
import time

import psutil
import psycopg
import pytest
from click.testing import CliRunner

from memory_assets import database, gates
from memory_assets import vocabulary as V
from memory_assets.api import Memory
from memory_assets.cli import main
from memory_assets.ledger import capture
from tests.cases import full_text_merged, service_facts, units_analysed, units_counted

GOOD = {"project": "acme", "kind": "env", "type": "semantic", "title": "Staging needs TLS",
        "body": "Staging PostgreSQL requires sslmode=require because the proxy refuses plain TCP."}


AWS_KEY_BODY = "Deploy with AKIA" + "Q3ZX7KD4LMNPW2RT."  # a body the secret gate rejects


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def fact_lines(n: int, prefix: str) -> str:
    """A JSON-lines file's text of n distinct good lines, each its own task."""
    return "".join(json.dumps({**GOOD, "title": f"{prefix} {i}", "task_id": f"{prefix}-{i}"}) + "\n" for i in range(n))


def test_remember_and_show_round_trip(clean):
    result = run("remember", "--project", "acme", "--kind", "env", "--type", "semantic", "--title", GOOD["title"],
                 "--body", GOOD["body"], "--keyword", "tls", "--task-id", "T-1", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["token"] == "mem-1"
    shown = json.loads(run("show", "mem-1", "--project", "acme", "--json").stdout)
    assert shown["keywords"] == ["tls"] and shown["sources"][0]["task_id"] == "T-1"
    stats = json.loads(run("stats", "--project", "acme", "--json").stdout)
    assert stats["units_by_status"] == {"active": 1}


def test_remember_bad_input_exits_2_naming_field_and_limit(clean):
    cases = [
        (["--title", "x" * 81], "title: at most 80 characters"),
        (["--body", "y" * 1201], "body: at most 1200 characters"),
        (["--kind", "opinion"], "kind: must be one of"),
        (["--type", "factual"], "type: must be one of"),
        (["--confidence", "1.5"], "confidence: must be between 0 and 1"),
        (["--body", ""], "body: must not be empty"),
        (["--private"], "persona: required when visibility is private"),
    ]
    base = ["remember", "--project", "acme", "--kind", "env", "--type", "semantic", "--title", "t", "--body", "b b"]
    for overrides, message in cases:
        result = run(*base, *overrides)
        assert result.exit_code == 2, overrides
        assert message in result.stderr
    assert json.loads(run("stats", "--json").stdout)["units_by_status"] == {}


def test_a_private_unit_is_recalled_by_its_persona_only(clean):
    remembered = run("remember", "--project", "acme", "--kind", "env", "--type", "semantic", "--title", GOOD["title"],
                     "--body", GOOD["body"], "--persona", "ana", "--private", "--json")
    token = json.loads(remembered.stdout)["token"]
    query = ["recall", "--project", "acme", "--query", "staging TLS sslmode", "--json"]
    assert json.loads(run(*query).stdout)["hits"] == []
    assert [h["token"] for h in json.loads(run(*query, "--persona", "ana").stdout)["hits"]] == [token]


def test_recall_as_of_reads_iso_times_and_refuses_anything_else(clean):
    run("remember", *[f"--{k}={v}" for k, v in GOOD.items()])
    query = ["recall", "--project", "acme", "--query", "staging TLS sslmode", "--json"]
    assert json.loads(run(*query, "--as-of", "2000-01-01T00:00").stdout)["hits"] == []  # before it was remembered
    assert len(json.loads(run(*query, "--as-of", "2999-01-01T00:00Z").stdout)["hits"]) == 1
    refused = run(*query, "--as-of", "last tuesday")
    assert refused.exit_code == 2 and "as_of: must be an ISO 8601 time (got 'last tuesday')" in refused.stderr


def test_json_file_with_invalid_utf8_is_refused(clean, tmp_path):
    path = tmp_path / "unit.json"
    path.write_bytes(b'{"project": "acme", "title": "caf\xe9"}')
    result = run("remember", "--json-file", str(path))
    assert result.exit_code == 2 and "json_file: must be valid UTF-8" in result.stderr


def test_a_file_with_no_size_to_check_is_read_only_up_to_its_limit(clean, tmp_path):
    """Regression (an attacker's pass): --json-file /dev/zero grew memory until a MemoryError traceback (exit 1), and
    --source-file read 300 MB before its length was checked; each now stops reading past its limit (exit 2)."""
    zero = run("remember", "--json-file", "/dev/zero")
    assert zero.exit_code == 2 and f"json_file: at most {V.IMPORT_MAX_LINE_BYTES} bytes" in zero.stderr
    big = tmp_path / "source.txt"
    big.write_bytes(b"x" * (V.SOURCE_TEXT_MAX_BYTES + 1))
    source = run("remember", *[f"--{k}={v}" for k, v in GOOD.items()], "--source-file", str(big))
    assert source.exit_code == 2 and f"source_file: at most {V.SOURCE_TEXT_MAX_BYTES} bytes" in source.stderr


def test_an_import_of_bad_lines_counts_them_all_and_keeps_the_first_few(clean, tmp_path, monkeypatch):
    """Regression (an attacker's pass): every bad line's message was kept and printed, 80 times the file's size in
    memory (949 MB for 12 MB of "x" lines)."""
    monkeypatch.setattr(V, "IMPORT_ERRORS_SHOWN", 3)
    path = tmp_path / "units.jsonl"
    path.write_text("x\n" * 9 + json.dumps(GOOD) + "\n")
    result = run("import", str(path), "--json")
    summary = json.loads(result.stdout)
    assert result.exit_code == 2 and (summary["bad_lines"], summary["captured"]) == (9, 1)
    assert [e.split(":")[0] for e in summary["errors"]] == ["line 1", "line 2", "line 3"]
    assert "… and 6 more bad lines (the first 3 are shown)" in result.stderr


def test_import_reports_bad_lines_by_number_and_imports_the_rest(clean, tmp_path):
    lines = [
        json.dumps(GOOD),
        "{not json",
        json.dumps({**GOOD, "title": "x" * 81}),
        json.dumps({**GOOD, "title": "Second fact", "body": "Builds need 8 GiB because the linker is greedy."}),
    ]
    path = tmp_path / "units.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode() + b'{"project": "acme", "title": "\xff"}\n')
    result = run("import", str(path), "--json")
    assert result.exit_code == 2
    summary = json.loads(result.stdout)
    assert (summary["captured"], summary["inserted"]) == (2, 2)
    assert [e.split(":")[0] for e in summary["errors"]] == ["line 2", "line 3", "line 5"]
    assert "line 3: title: at most 80 characters" in result.stderr
    assert "line 5: not valid UTF-8" in result.stderr
    assert json.loads(run("stats", "--json").stdout)["units_by_status"] == {"active": 2}


def in_turn(monkeypatch, act) -> list[int]:
    """Wrap every batch's after_capture (the import's turn, inside the batch's transaction, before its fold) so that
    `act(batch_number, turn)` runs there in its place; the batch numbers seen, from 1."""
    real = Memory.remember_many
    batches: list[int] = []

    def remember_many(self, candidates, **kwargs):
        batches.append(len(batches) + 1)
        number, turn = batches[-1], kwargs["after_capture"]
        return real(self, candidates, **{**kwargs, "after_capture": lambda: act(number, turn)})

    monkeypatch.setattr(Memory, "remember_many", remember_many)
    return batches


def kill_switch(url: str, state: str) -> None:
    """Turn the kill switch on or off from a session of its own, as an operator would during an import."""
    with Memory(database.open_pool(url), url) as mem:
        mem.set_switch("kill", "", state)


def first_batch_slow(number, turn) -> None:
    """An in_turn act: the first batch holds its transaction open a while after its turn, so the next batch is
    captured (and meets its rows uncommitted) while it folds."""
    turn()
    if number == 1:
        time.sleep(0.3)


def titles_past_validation(monkeypatch) -> None:
    """Let a title past validation that the units' CHECK constraint (80 characters) refuses, as a value the
    database refuses that validation missed would be."""
    real_validate = gates.validate

    def lenient(**fields):
        candidate = real_validate(**{**fields, "title": "placeholder"})
        return dataclasses.replace(candidate, title=fields.get("title"))

    monkeypatch.setattr(gates, "validate", lenient)


def inbox_updates_flushed(conn, at_least: int) -> tuple[int, int]:
    """The inbox's HOT and all updates as the statistics count them, once other sessions' counts have reached
    `at_least` updates (a session flushes them within a second of going idle)."""
    deadline = time.monotonic() + 10
    while True:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        hot, updated = conn.execute("SELECT pg_stat_get_tuples_hot_updated('memory_inbox'::regclass), "
                                    "pg_stat_get_tuples_updated('memory_inbox'::regclass)").fetchone()
        if updated >= at_least or time.monotonic() > deadline:
            return hot, updated
        time.sleep(0.1)


def test_an_import_stopped_in_a_batch_has_imported_the_files_first_batches_and_run_again_imports_the_rest(
        clean, tmp_path, conn, monkeypatch, today):
    """Each batch is captured and folded in one transaction, in file order: should a fold fail (the server gone
    mid-import), the command fails with that error, its batch and every batch after it leave nothing (the next one
    had been captured meanwhile), no row waits for a fold, and the import run again imports the rest, every line
    once and numbered as the lines come."""
    monkeypatch.setattr(V, "IMPORT_BATCH", 2)

    def server_gone_in_second(number, turn):
        turn()
        if number == 2:
            time.sleep(0.2)  # the third batch is captured and waits for its turn meanwhile
            raise psycopg.OperationalError("server closed the connection unexpectedly")

    batches = in_turn(monkeypatch, server_gone_in_second)
    path = tmp_path / "units.jsonl"
    path.write_text("\n".join(json.dumps({**GOOD, "title": f"Fact {i}"}) for i in range(5)) + "\n")
    with pytest.raises(psycopg.OperationalError, match="server closed"):
        run("import", str(path), "--json")
    assert batches == [1, 2, 3]
    assert conn.execute("SELECT title FROM memory_inbox ORDER BY title").fetchall() == [("Fact 0",), ("Fact 1",)]
    assert conn.execute("SELECT count(*) FROM memory_inbox WHERE unit_id IS NULL OR awaits_fold").fetchone()[0] == 0
    monkeypatch.undo()
    again = run("import", str(path), "--json")
    assert again.exit_code == 0 and json.loads(again.stdout)["inserted"] == 3
    assert capture.fold(conn, day=today)["inserted"] == 0
    assert conn.execute("SELECT title FROM memory_units ORDER BY number").fetchall() == [
        (f"Fact {i}",) for i in range(5)]


def test_an_import_fails_with_the_first_batchs_error_not_a_later_ones(clean, tmp_path, monkeypatch):
    """Regression (a review): the batch after a failed one, failing with its own error before its turn, replaced the
    first error when the command waited for it on the way out."""
    monkeypatch.setattr(V, "IMPORT_BATCH", 2)

    def two_failures(number, turn):
        if number == 3:
            raise psycopg.OperationalError("the later error")
        turn()
        if number == 2:
            raise psycopg.OperationalError("the first error")

    in_turn(monkeypatch, two_failures)
    path = tmp_path / "units.jsonl"
    path.write_text(fact_lines(5, "Fact"))
    with pytest.raises(psycopg.OperationalError, match="the first error"):
        run("import", str(path), "--json")


def test_a_batch_the_kill_switch_refused_stops_the_import_even_once_it_is_off_again(clean, tmp_path, monkeypatch,
                                                                                   conn):
    """Regression (a review): a batch refused by the kill switch did not count as failed, so a batch after it, once
    the switch was off again, was written past the gap it left."""
    monkeypatch.setattr(V, "IMPORT_BATCH", 2)
    real = Memory.remember_many
    calls: list[int] = []
    second_ended = threading.Event()

    def remember_many(self, candidates, **kwargs):
        calls.append(len(calls) + 1)
        number, turn = calls[-1], kwargs["after_capture"]

        def in_its_turn() -> None:
            if number == 3:  # once batch 2 has ended, refused, and before batch 3 takes its turn
                second_ended.wait()
                kill_switch(clean, "off")
            turn()
            if number == 2:  # batch 1 has committed: batch 2 reads the switch on as it ends
                kill_switch(clean, "on")

        try:
            return real(self, candidates, **{**kwargs, "after_capture": in_its_turn})
        finally:
            if number == 2:
                second_ended.set()

    monkeypatch.setattr(Memory, "remember_many", remember_many)
    path = tmp_path / "units.jsonl"
    path.write_text(fact_lines(6, "Fact"))
    result = run("import", str(path))
    assert calls == [1, 2, 3]
    assert "imported 2 of 6 lines" in result.stdout and "the batches after it stored nothing" in result.stdout
    assert conn.execute("SELECT title FROM memory_units ORDER BY number").fetchall() == [("Fact 0",), ("Fact 1",)]


def test_a_batch_with_nothing_to_fold_keeps_its_place(clean, tmp_path, monkeypatch, conn):
    """A batch whose every line the gates reject still waits for the batch before it, so the batch after it cannot
    fold first: units are numbered as the lines come."""
    monkeypatch.setattr(V, "IMPORT_BATCH", 2)

    in_turn(monkeypatch, first_batch_slow)
    secret = {**GOOD, "body": AWS_KEY_BODY}
    lines = [{**GOOD, "title": "A"}, {**GOOD, "title": "B"}, {**secret, "title": "S1"}, {**secret, "title": "S2"},
             {**GOOD, "title": "C"}, {**GOOD, "title": "D"}]
    path = tmp_path / "units.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    summary = json.loads(run("import", str(path), "--json").stdout)
    assert (summary["inserted"], summary["rejected"]) == (4, {V.REASON_SECRET: 2})
    assert conn.execute("SELECT title FROM memory_units ORDER BY number").fetchall() == [
        ("A",), ("B",), ("C",), ("D",)]


def test_the_next_batchs_rejections_wait_for_no_fold_before_it(clean, tmp_path, monkeypatch):
    """Each batch counts its rejections after its fold: the next batch, counting the same (project, feed, reason),
    is captured and takes its turn while the batch before still folds, as a batch without rejections does."""
    monkeypatch.setattr(V, "IMPORT_BATCH", 2)
    events: list[str] = []

    def noting_turns(number, turn):
        events.append(f"turn {number}")
        turn()
        if number == 1:
            time.sleep(0.5)
            events.append("1 folding")

    in_turn(monkeypatch, noting_turns)
    secret = {**GOOD, "body": AWS_KEY_BODY}
    lines = [{**GOOD, "title": "A"}, {**secret, "title": "S1"}, {**GOOD, "title": "B"}, {**secret, "title": "S2"}]
    path = tmp_path / "units.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    summary = json.loads(run("import", str(path), "--json").stdout)
    assert (summary["inserted"], summary["rejected"]) == (2, {V.REASON_SECRET: 2})
    assert events.index("turn 2") < events.index("1 folding"), events


def test_an_import_killed_mid_way_leaves_no_transaction_open_and_its_gate_workers_exit(clean, tmp_path, conn):
    """Regression (an attacker's pass): the gate processes, forked from the import, inherited its database
    connections, so a killed import left them holding its open transactions (its project's counter row locked, the
    import run again and every remember() of the project waiting) for as long as they lived, which was forever. They
    now close the sockets they inherit and exit with the process they were forked from."""
    path = tmp_path / "units.jsonl"
    path.write_text(fact_lines(6000, "Fact"))
    command = [sys.executable, "-m", "memory_assets.cli", "import", str(path), "--json"]
    env = {**os.environ, "DATABASE_URL": clean}
    importing = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while conn.execute("SELECT count(*) FROM memory_units").fetchone()[0] < 750:  # gated in processes since 250
        assert time.monotonic() < deadline and importing.poll() is None
        time.sleep(0.02)
    importing.kill()
    importing.wait()

    def left() -> tuple[int, list[int]]:
        open_transactions = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%'"
                                         " AND pid <> pg_backend_pid()").fetchone()[0]
        workers = [p.pid for p in psutil.process_iter(["cmdline"]) if str(path) in " ".join(p.info["cmdline"] or [])]
        return open_transactions, workers

    deadline = time.monotonic() + 10
    while left() != (0, []) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left() == (0, [])
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    assert conn.execute("SELECT count(*), count(DISTINCT title) FROM memory_units").fetchone() == (6000, 6000)


def test_a_line_repeated_in_the_next_batch_is_counted_once(clean, tmp_path, monkeypatch, conn):
    """The next batch is captured while the one before folds, so its capture of a line of both waits for that
    batch's commit (never the other way round: no deadlock) and writes nothing: the line is counted once, and the
    units are numbered as the lines come."""
    monkeypatch.setattr(V, "IMPORT_BATCH", 2)

    in_turn(monkeypatch, first_batch_slow)
    lines = [{**GOOD, "title": title} for title in ("Fact A", "Fact B", "Fact A", "Fact C")]
    path = tmp_path / "units.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    result = run("import", str(path), "--json")
    summary = json.loads(result.stdout)
    assert result.exit_code == 0 and (summary["captured"], summary["inserted"]) == (3, 3), summary
    assert conn.execute("SELECT title FROM memory_units ORDER BY number").fetchall() == [
        ("Fact A",), ("Fact B",), ("Fact C",)]


def test_an_imports_batches_fold_in_file_order_whichever_is_captured_first(clean, tmp_path, monkeypatch, conn):
    """A batch folds once the batch before it has committed, even when its own capture ends first: units are
    numbered as the lines come, and the import links its rows in HOT updates (captured and folded in one
    transaction, no row is left flagged for a later fold)."""
    monkeypatch.setattr(V, "IMPORT_BATCH", 3)
    order: list[int] = []

    def first_slow(number, turn):  # the next batches are captured and reach their turn while the first waits here
        turn()
        if number == 1:
            time.sleep(0.3)
        order.append(number)

    in_turn(monkeypatch, first_slow)
    path = tmp_path / "units.jsonl"
    path.write_text(fact_lines(9, "Fact"))
    before = inbox_updates_flushed(conn, at_least=0)
    result = run("import", str(path), "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["inserted"] == 9
    assert order == [1, 2, 3]
    assert conn.execute("SELECT title FROM memory_units ORDER BY number").fetchall() == [
        (f"Fact {i}",) for i in range(9)]
    hot, updated = inbox_updates_flushed(conn, at_least=before[1] + 9)
    assert (hot - before[0], updated - before[1]) == (9, 9)
    assert conn.execute("SELECT count(*) FROM memory_inbox WHERE awaits_fold").fetchone()[0] == 0


def test_import_without_fold_leaves_rows_for_the_ledger(clean, tmp_path, conn):
    path = tmp_path / "units.jsonl"
    path.write_text(json.dumps(GOOD) + "\n")
    assert run("import", str(path), "--no-fold").exit_code == 0
    assert conn.execute("SELECT count(*) FROM memory_inbox WHERE unit_id IS NULL").fetchone()[0] == 1
    assert conn.execute("SELECT count(*) FROM memory_units").fetchone()[0] == 0


def test_import_without_fold_buries_forgotten_text_as_it_captures(mem, tmp_path, conn, stored_text, monkeypatch):
    """Regression (an attacker's pass): an import with --no-fold kept forgotten text in the inbox until a fold
    buried it; the capture buries it now. An import that folds buries it in its batch's own fold."""
    from memory_assets import authz

    token = mem.remember(**GOOD).token
    mem.forget("acme", token, authz.Actor.for_project("acme", "op", forget=True))
    path = tmp_path / "units.jsonl"
    path.write_text(json.dumps({**GOOD, "task_id": "T-2"}) + "\n")
    assert run("import", str(path), "--no-fold").exit_code == 0
    assert conn.execute("SELECT outcome FROM memory_inbox WHERE task_id = 'T-2'").fetchall() == [
        (V.INBOX_FORGOTTEN,)]
    assert GOOD["body"] not in stored_text()


def test_show_unknown_token_exits_2(clean):
    result = run("show", "mem-x", "--project", "acme")
    assert result.exit_code == 2 and "token: must look like mem-<n>" in result.stderr


def test_forget_confirm_and_flag_from_the_command_line(clean, monkeypatch):
    monkeypatch.setenv(V.OPERATORS_ENV, "operator")  # forget is for the deployment's operators only
    run("remember", "--project", "acme", "--kind", "env", "--type", "semantic", "--title", GOOD["title"],
        "--body", GOOD["body"])
    confirmed = json.loads(run("confirm", "mem-1", "--project", "acme", "--task-id", "T-1", "--json").stdout)
    assert (confirmed["confirms"], confirmed["flags"]) == (1, 0)
    flagged = json.loads(run("flag", "mem-1", "--project", "acme", "--task-id", "T-2", "--json").stdout)
    assert (flagged["confirms"], flagged["flags"]) == (1, 1) and flagged["trust"] < confirmed["trust"]
    forgotten = run("forget", "mem-1", "--project", "acme", "--reason", "asked", "--json")
    assert forgotten.exit_code == 0 and json.loads(forgotten.stdout)["status"] == "forgotten"
    shown = json.loads(run("show", "mem-1", "--project", "acme", "--json").stdout)
    assert (shown["status"], shown["title"], shown["body"]) == ("forgotten", "", "")
    again = run("forget", "mem-1", "--project", "acme", "--reason", "twice")
    assert again.exit_code == 2 and "token: no live unit mem-1" in again.stderr
    run("remember", "--project", "acme", "--kind", "env", "--type", "semantic", "--title", GOOD["title"],
        "--body", "A private note of ana's on the staging relay.", "--persona", "ana", "--private")
    refused = run("flag", "mem-2", "--project", "acme", "--task-id", "T-3")
    assert refused.exit_code == 2 and "token: no unit mem-2 in project acme" in refused.stderr
    as_ana = json.loads(run("flag", "mem-2", "--project", "acme", "--task-id", "T-3", "--persona", "ana",
                            "--json").stdout)
    assert as_ana["flags"] == 1


def test_a_credential_typed_into_any_flag_is_never_quoted_back_nor_kept(clean, tmp_path, monkeypatch):
    """Regression (an attacker's review): click's usage errors and some of our own quoted the value they refused,
    the project of a missing token was named back, and a forget's reason and a review's actor were kept in the
    audit log whatever they held. Each is now an exit 2 that shows no credential, with nothing written."""
    monkeypatch.setenv(V.OPERATORS_ENV, "operator")
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    run("remember", "--project", "acme", "--kind", "env", "--type", "semantic", "--title", GOOD["title"],
        "--body", GOOD["body"], "--confidence", "0.5")  # in review
    refused = [
        run("recall", "--project", "acme", "--query", "staging", "--k", secret),
        run("remember", "--project", "acme", "--kind", "env", "--type", "semantic", "--title", "t", "--body", "b",
            "--confidence", secret),
        run("import", str(tmp_path / f"{secret}.jsonl")),
        run("show", "mem-1", "--project", secret),
        run("materialize", "--date", secret),
        run("forget", "mem-1", "--project", "acme", "--reason", f"the token was {secret}"),
        run("forget", "mem-1", "--project", "acme", "--reason", "asked", "--actor", secret),
        run("review", "decide", "mem-1", "approve", "--project", "acme", "--actor", secret),
        run("review", "decide", "mem-1", secret, "--project", "acme"),
    ]
    assert [r.exit_code for r in refused] == [2] * len(refused)
    assert [r.args for r in refused if secret in r.output or secret in r.stderr] == []
    with psycopg.connect(clean) as conn:
        assert conn.execute("SELECT status FROM memory_units").fetchall() == [("review",)]
        kept = conn.execute("SELECT count(*) FROM audit_log WHERE actor LIKE %s OR reason LIKE %s OR details::text "
                            "LIKE %s", (f"%{secret}%",) * 3).fetchone()[0]
        assert kept == 0


def test_import_under_the_kill_switch_says_memory_is_off_and_stores_nothing(clean, tmp_path):
    """Regression: the import crashed (KeyError) on remember_many's "off" answer."""
    kill_switch(clean, "on")
    path = tmp_path / "units.jsonl"
    path.write_text(fact_lines(3, "Off"))
    result = run("import", str(path), "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["off"] is True
    with psycopg.connect(clean) as conn:
        assert conn.execute("SELECT count(*) FROM memory_inbox").fetchone()[0] == 0
    assert "memory is off (the kill switch): nothing stored." in run("import", str(path)).stdout


def test_an_import_the_kill_switch_stops_half_way_says_what_it_stored(clean, tmp_path, monkeypatch):
    """Regression (an attacker's pass): switched off during an import, the command said "nothing stored" after
    storing its first batches."""
    monkeypatch.setattr(V, "IMPORT_BATCH", 2)

    def off_after_first(number, turn):
        turn()
        if number == 2:  # batch 1 has committed: batch 2 reads the switch on as it ends
            kill_switch(clean, "on")

    in_turn(monkeypatch, off_after_first)
    path = tmp_path / "units.jsonl"
    path.write_text(fact_lines(4, "Half"))
    result = run("import", str(path))
    assert "imported 2 of 4 lines" in result.stdout
    assert "memory is off (the kill switch): the batches after it stored nothing." in result.stdout


def test_import_reports_hostile_lines_and_imports_the_rest(clean, tmp_path, monkeypatch):
    """Deep nesting, duplicate keys, huge or NaN numbers, an over-long line, control characters, a bad supersedes
    field: each line is reported by number and reason, never a RecursionError, and every good line imports."""
    monkeypatch.setattr(V, "IMPORT_MAX_LINE_BYTES", 2000)
    second = {**GOOD, "title": "Second fact", "body": "Builds need 8 GiB because the linker is greedy."}
    lines = [
        json.dumps(GOOD).encode(),                                                          # 1 good
        b'{"project": "acme", "keywords": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",      # 2 deep (and long)
        b'{"project": "acme", "keywords": ' + b"[" * 9 + b"]" * 9 + b"}",                   # 3 deep
        json.dumps(GOOD)[:-1].encode() + b', "title": "again"}',                             # 4 duplicate key
        json.dumps({**GOOD, "title": "Big"})[:-1].encode() + b', "confidence": ' + b"9" * 400 + b"}",  # 5
        json.dumps({**GOOD, "title": "NaN"})[:-1].encode() + b', "confidence": NaN}',        # 6
        json.dumps({**GOOD, "body": "y" * 3000}).encode(),                                    # 7 too long
        json.dumps({**GOOD, "title": "bell \u0007 title"}).encode(),                          # 8 control char
        json.dumps({**GOOD, "task_id": "has space"}).encode(),                                # 9 id grammar
        json.dumps({**GOOD, "valid_from": "0001-01-01T00:00:00+14:00"}).encode(),             # 10 time
        json.dumps({**GOOD, "confidence": 5e-324, "title": "Tiny"}).encode(),                  # 11 good
        json.dumps(second).encode(),                                                          # 12 good
    ]
    path = tmp_path / "units.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    result = run("import", str(path), "--json")
    assert result.exit_code == 2
    summary = json.loads(result.stdout)
    assert (summary["lines"], summary["captured"], summary["inserted"]) == (12, 3, 3)
    errors = dict(e.split(": ", 1) for e in summary["errors"])
    assert errors == {
        "line 2": "longer than 2000 bytes", "line 3": "line: nested deeper than 8 levels",
        "line 4": "title: duplicate key", "line 5": "number: at most 64 characters",
        "line 6": "number: NaN is not a JSON number", "line 7": "longer than 2000 bytes",
        "line 8": "title: must not contain control or format characters (U+0007)",
        "line 9": "task_id: " + V.ID_RULE,
        "line 10": "valid_from: must lie between 1970-01-01 and 9000-01-01 (UTC)",
    }
    assert json.loads(run("stats", "--json").stdout)["units_by_status"] == {"active": 2, "review": 1}  # 0 confidence


def test_import_reports_a_line_the_database_refuses_and_imports_the_rest(clean, tmp_path, monkeypatch):
    """Should a value pass validation and still be refused by the database, only its line is reported."""
    titles_past_validation(monkeypatch)
    path = tmp_path / "units.jsonl"
    path.write_text("\n".join([json.dumps(GOOD), json.dumps({**GOOD, "title": "x" * 81}),
                               json.dumps({**GOOD, "title": "Third", "body": "Deploys wait for the green build."})]))
    result = run("import", str(path), "--json")
    assert result.exit_code == 2
    summary = json.loads(result.stdout)
    assert summary["errors"] == ["line 2: refused by the database (CheckViolation)"]
    assert summary["captured"] == 2


def test_a_rerun_reports_a_refused_line_an_earlier_run_captured_and_counts_only_what_it_captured(
        clean, tmp_path, monkeypatch, conn):
    """A row the database refuses, captured by an earlier run that left its rows for a later fold (--no-fold, or an
    older release stopped between its capture and its fold): the import run again folds it, reports its line and
    drops it, and counts as captured only the rows it wrote itself (none here)."""
    titles_past_validation(monkeypatch)
    monkeypatch.setattr(V, "IMPORT_BATCH", 2)
    path = tmp_path / "units.jsonl"
    path.write_text("\n".join([json.dumps({**GOOD, "title": "First"}), json.dumps({**GOOD, "title": "x" * 81}),
                               json.dumps({**GOOD, "title": "Third", "body": "Deploys wait for the green build."})]))
    assert run("import", str(path), "--no-fold").exit_code == 0
    assert conn.execute("SELECT count(*) FROM memory_inbox WHERE unit_id IS NULL AND awaits_fold").fetchone()[0] == 3
    again = run("import", str(path), "--json")
    summary = json.loads(again.stdout)
    assert again.exit_code == 2 and summary["errors"] == ["line 2: refused by the database (CheckViolation)"]
    assert (summary["captured"], summary["inserted"]) == (0, 2)
    assert conn.execute("SELECT count(*) FROM memory_inbox WHERE unit_id IS NULL").fetchone()[0] == 0


def test_a_refused_line_repeated_in_the_next_batch_is_reported_by_each_batch(clean, tmp_path, monkeypatch):
    """A line the database refuses, repeated in the next batch: the first batch drops its row, and the next one,
    whose capture waited for that commit, writes it again and drops it too, so each line is reported and neither
    is counted as captured."""
    titles_past_validation(monkeypatch)
    monkeypatch.setattr(V, "IMPORT_BATCH", 2)
    in_turn(monkeypatch, first_batch_slow)
    refused = json.dumps({**GOOD, "title": "x" * 81})
    path = tmp_path / "units.jsonl"
    path.write_text("\n".join([json.dumps({**GOOD, "title": "First"}), refused, refused,
                               json.dumps({**GOOD, "title": "Fourth", "body": "Deploys wait for the green build."})]))
    result = run("import", str(path), "--json")
    summary = json.loads(result.stdout)
    assert result.exit_code == 2 and summary["errors"] == [
        "line 2: refused by the database (CheckViolation)", "line 3: refused by the database (CheckViolation)"]
    assert (summary["captured"], summary["inserted"]) == (2, 2)


def test_a_refused_row_left_for_a_later_fold_is_reported_on_every_line_that_repeats_it(clean, tmp_path,
                                                                                          monkeypatch, conn):
    """A refused row an `import --no-fold` left, repeated in two batches of the next import: the second batch's
    capture reads the row as captured already, and the first batch's fold drops it before the second's fold; each
    line is reported all the same, and counted as no capture."""
    titles_past_validation(monkeypatch)
    monkeypatch.setattr(V, "IMPORT_BATCH", 2)
    refused = json.dumps({**GOOD, "title": "x" * 81})
    (tmp_path / "earlier.jsonl").write_text(refused + "\n")
    assert run("import", str(tmp_path / "earlier.jsonl"), "--no-fold").exit_code == 0
    in_turn(monkeypatch, first_batch_slow)
    path = tmp_path / "units.jsonl"
    path.write_text("\n".join([json.dumps({**GOOD, "title": "First"}), refused, refused,
                               json.dumps({**GOOD, "title": "Fourth", "body": "Deploys wait for the green build."})]))
    summary = json.loads(run("import", str(path), "--json").stdout)
    assert summary["errors"] == [
        "line 2: refused by the database (CheckViolation)", "line 3: refused by the database (CheckViolation)"]
    assert (summary["captured"], summary["inserted"]) == (2, 2)
    assert conn.execute("SELECT count(*) FROM memory_inbox WHERE unit_id IS NULL").fetchone()[0] == 0


def test_remember_refuses_control_characters_and_bad_ids(clean):
    base = ["remember", "--project", "acme", "--kind", "env", "--type", "semantic", "--title", "t", "--body", "b b"]
    for extra, message in ((["--title", "zero\u200bwidth"], "title: must not contain control or format"),
                           (["--persona", "ana\x00"], "persona: must not contain NUL"),
                           (["--session-id", "two words"], "session_id: " + V.ID_RULE),
                           (["--supersedes", "42"], "supersedes: must be a token like mem-<n>")):
        result = run(*base, *extra)
        assert result.exit_code == 2 and message in result.stderr, extra


def test_import_streams_batches_and_reports_bad_lines_across_them(tmp_path, analysed_by_refreshes_only):
    """More lines than one batch: each batch gated in worker processes while the next is read; bad lines and a
    rejected secret in different batches are reported by number, everything else imports, and before the next
    recall the planner's statistics count what it imported (analysed beside the last folds, and after them where
    what they missed alone passes autovacuum's threshold) and the full-text index has nothing pending."""
    conn = analysed_by_refreshes_only
    lines = [json.dumps({**GOOD, "title": f"Fact {i}", "body": f"Service {i} needs {i % 7 + 1} GiB because of batch "
                                                              f"{i}.", "task_id": f"T-{i}"})
             for i in range(1, 2 * V.IMPORT_BATCH + 101)]
    lines[4] = "{not json"
    lines[V.IMPORT_BATCH + 499] = json.dumps({**GOOD, "title": "x" * 81})
    lines[V.IMPORT_BATCH + 199] = json.dumps({**GOOD, "title": "Key", "body": AWS_KEY_BODY})
    lines[-1] = json.dumps({**GOOD, "kind": "opinion"})
    path = tmp_path / "units.jsonl"
    path.write_text("\n".join(lines) + "\n")
    analyses = units_analysed(conn)
    result = run("import", str(path), "--json")
    assert result.exit_code == 2
    summary = json.loads(result.stdout)
    assert [e.split(":")[0] for e in summary["errors"]] == [
        "line 5", f"line {V.IMPORT_BATCH + 500}", f"line {len(lines)}"]
    assert summary["rejected"] == {V.REASON_SECRET: 1}
    assert summary["captured"] == summary["inserted"] == len(lines) - 4
    counted = units_counted(conn)
    base, share = conn.execute("SELECT current_setting('autovacuum_analyze_threshold')::float8, "
                               "current_setting('autovacuum_analyze_scale_factor')::float8").fetchone()
    assert 0 <= summary["inserted"] - counted <= base + share * counted  # what is missed stays under the threshold
    assert analyses + 1 <= units_analysed(conn) <= analyses + 2
    assert full_text_merged(conn) == 0


def test_an_imports_last_batch_past_the_threshold_alone_is_analysed_after_its_fold(tmp_path,
                                                                                  analysed_by_refreshes_only):
    """The statistics refreshed beside the last batch's fold miss that batch: where it alone passes autovacuum's
    threshold (here half the store) they are refreshed again after it, so they count every unit imported."""
    conn = analysed_by_refreshes_only
    path = tmp_path / "units.jsonl"
    path.write_text(fact_lines(2 * V.IMPORT_BATCH, "Fact"))
    analyses = units_analysed(conn)
    result = run("import", str(path), "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["inserted"] == 2 * V.IMPORT_BATCH
    assert units_counted(conn) == 2 * V.IMPORT_BATCH and analyses + 1 <= units_analysed(conn) <= analyses + 2
    assert full_text_merged(conn) == 0


def test_an_import_into_a_store_its_batches_leave_under_the_threshold_analyses_and_merges_nothing(
        tmp_path, analysed_by_refreshes_only, monkeypatch):
    """An import that folds but leaves the store under autovacuum's threshold, before its last batch and after it,
    refreshes nothing beside that fold or after it: the statistics and the pending entries are left as they were;
    an ANALYZE beside the fold that gave up leaves every row to the refresh after it."""
    conn = analysed_by_refreshes_only
    monkeypatch.setattr(V, "IMPORT_BATCH", 30)
    capture.remember_many(conn, service_facts(300))
    assert database.refresh_statistics(conn, V.UNITS_TABLE) and full_text_merged(conn) == 0
    (tmp_path / "under.jsonl").write_text(fact_lines(60, "Line"))  # two batches, 60 rows: under 50 + 10% of 300
    analyses = units_analysed(conn)
    assert run("import", str(tmp_path / "under.jsonl")).exit_code == 0
    assert units_analysed(conn) == analyses and units_counted(conn) == 300 and full_text_merged(conn) > 0
    monkeypatch.setattr(Memory, "analyse_statistics", lambda self: False)  # a VACUUM held the table beside the fold
    (tmp_path / "past.jsonl").write_text(fact_lines(90, "Past"))
    assert run("import", str(tmp_path / "past.jsonl")).exit_code == 0
    assert units_analysed(conn) == analyses + 1 and units_counted(conn) == 450 and full_text_merged(conn) == 0


def test_an_import_that_folds_nothing_refreshes_a_stale_store_as_before(tmp_path, analysed_by_refreshes_only):
    """With no fold beside its end (only bad lines, or --no-fold) the import ends with the one refresh it always
    had: a store under the threshold is left alone, its pending full-text entries too, and one that other writes
    left past it is analysed and its pending entries merged."""
    conn = analysed_by_refreshes_only
    facts = service_facts(301)
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    capture.remember_many(conn, facts[:1])
    analyses = units_analysed(conn)
    assert run("import", str(tmp_path / "bad.jsonl")).exit_code == 2
    assert units_analysed(conn) == analyses + 1 and units_counted(conn) == 1  # a store never analysed is stale
    capture.remember_many(conn, facts[1:2])
    assert not database.statistics_stale(conn, V.UNITS_TABLE)  # its counters flushed: under 50 + 10% of 1
    assert run("import", str(tmp_path / "bad.jsonl")).exit_code == 2
    assert units_analysed(conn) == analyses + 1 and full_text_merged(conn) > 0  # left pending
    capture.remember_many(conn, facts[2:])
    assert database.statistics_stale(conn, V.UNITS_TABLE)  # another writer's 299 units: past it
    assert run("import", str(tmp_path / "bad.jsonl"), "--no-fold").exit_code == 2
    assert units_analysed(conn) == analyses + 2 and units_counted(conn) == 301 and full_text_merged(conn) == 0


def test_import_gates_the_next_batch_while_the_last_one_is_written(clean, tmp_path, monkeypatch):
    """The gate processes start on batch k+1 before the writers have folded batch k (the import's overlap), the
    first batch is IMPORT_FIRST_BATCH lines and each next one twice as large up to IMPORT_BATCH (the first fold
    starts early), and the batches are still written in file order, so units are numbered as the lines come."""
    events: list[str] = []
    real_gate_soon, real_remember_many = Memory.gate_soon, Memory.remember_many

    def gate_soon(self, candidates, **kwargs):
        events.append(f"gate {candidates[0].title}")
        return real_gate_soon(self, candidates, **kwargs)

    def remember_many(self, candidates, **kwargs):
        title = candidates.candidates[0].title
        events.append(f"write {title}")
        time.sleep(0.5)  # a slow write: reading the next 1,000 lines takes far less
        counts = real_remember_many(self, candidates, **kwargs)
        events.append(f"written {title}")
        return counts

    monkeypatch.setattr(Memory, "gate_soon", gate_soon)
    monkeypatch.setattr(Memory, "remember_many", remember_many)
    lines = 3 * V.IMPORT_BATCH
    path = tmp_path / "units.jsonl"
    path.write_text("".join(json.dumps({**GOOD, "title": f"Fact {i}", "body": f"Service {i} is up."}) + "\n"
                            for i in range(lines)))
    result = run("import", str(path), "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["inserted"] == lines, result.output
    starts, size = [0], V.IMPORT_FIRST_BATCH
    while starts[-1] + size < lines:
        starts, size = [*starts, starts[-1] + size], min(2 * size, V.IMPORT_BATCH)
    assert starts == [0, 250, 750, 1750, 2750]
    assert [e for e in events if e.startswith("write")] == [f"write Fact {start}" for start in starts]
    for before, after in itertools.pairwise(starts):
        assert events.index(f"gate Fact {after}") < events.index(f"written Fact {before}"), events
    for start in starts:
        shown = json.loads(run("show", f"{V.TOKEN_PREFIX}{start + 1}", "--project", "acme", "--json").stdout)
        assert shown["title"] == f"Fact {start}"
