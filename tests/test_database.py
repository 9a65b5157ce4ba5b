"""The database module: every named query prepares against the real schema; migrations and spellings hold."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from memory_assets import database
from memory_assets import vocabulary as V
from memory_assets.ledger import capture
from tests.cases import full_text_merged, function_in_migration, service_facts, units_counted

NAMED_PARAMETER = re.compile(r"%\((\w+)\)s")
DDL = re.compile(r"^(\s*--[^\n]*\n)*\s*(CREATE|ALTER|DROP)\b")
RUNTIME_VALUES = {"dim": "384", "model": "'minilm-l6@gt0.1-t1'"}  # what psycopg.sql composes per model


def prepared_text(name: str) -> str:
    """A named query as PREPARE takes it: %(name)s parameters as $n, runtime placeholders filled."""
    text = database.query(name)
    for key, value in RUNTIME_VALUES.items():
        text = text.replace("{" + key + "}", value)
    numbers: dict[str, int] = {}
    text = NAMED_PARAMETER.sub(lambda m: f"${numbers.setdefault(m.group(1), len(numbers) + 1)}", text)
    return text.replace("%%", "%").rstrip().rstrip(";")


@pytest.mark.parametrize("name", database.query_names())
def test_every_named_query_prepares(conn, name):
    """PREPARE parses, resolves and types the statement: a renamed column or a bad placeholder fails here."""
    assert not database.PLACEHOLDER.search(prepared_text(name)), "an unspelled placeholder is left"
    statement = prepared_text(name)
    with conn.transaction(force_rollback=True):
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS inbox_stage (LIKE memory_inbox INCLUDING DEFAULTS)")
        if DDL.match(statement):  # PREPARE takes no DDL: run it and roll back
            conn.execute(statement)
        else:
            conn.execute(f"PREPARE named_query AS {statement}")
            conn.execute("DEALLOCATE named_query")


def test_the_named_query_list_is_complete_and_fragments_are_included():
    """Every .sql under sql/queries is listed (fragments, named _x, are spelled into the queries that use them)."""
    names = database.query_names()
    assert "ledger/fold" in names and "recall/candidates" in names
    assert not any(name.split("/")[1].startswith("_") for name in names)
    assert "{recall/_unit_filters}" not in database.query("recall/candidates")
    assert "u.private_to IS NULL" in database.query("recall/candidates")


def test_placeholders_are_spelled_from_the_vocabulary():
    """{live_statuses} in a file is the vocabulary's tuple, so the fold can never drift from the live index."""
    assert f"u.status IN {database.sql_list(V.RECALLABLE_STATUSES)}" in database.query("recall/candidates")
    assert database.SPELLINGS["token_prefix"] == f"'{V.TOKEN_PREFIX}'"


def test_an_unknown_placeholder_is_an_error(tmp_path, monkeypatch):
    """A typo in a placeholder fails loudly instead of reaching the database as text."""
    (tmp_path / "queries" / "x").mkdir(parents=True)
    (tmp_path / "queries" / "x" / "typo.sql").write_text("SELECT 1 WHERE status IN {live_statusses}")
    monkeypatch.setattr(database, "sql_dir", lambda: tmp_path)
    database.query.cache_clear()
    try:
        with pytest.raises(KeyError, match="live_statusses"):
            database.query("x/typo")
    finally:
        database.query.cache_clear()


def test_a_long_statement_runs_with_its_parameters_numbered_once(conn):
    """execute_positional numbers each name once (a name used twice is one parameter) and gives the rows psycopg's own
    parse gives; a literal % (which psycopg would unescape) is refused rather than sent wrong."""
    statement = "SELECT %(a)s::int + %(b)s::int AS total, %(a)s::int AS again" + " " * 5000  # past psycopg's 4 kB cache
    assert database.positional(statement) == ("SELECT $1::int + $2::int AS total, $1::int AS again" + " " * 5000,
                                              ("a", "b"))
    params = {"a": 2, "b": 40, "unused": "ignored"}
    assert database.execute_positional(conn, statement, params).fetchall() == conn.execute(statement, params).fetchall()
    assert database.execute_positional(conn, statement, params).fetchall() == [(42, 2)]
    # the rows come back in binary and load as their text would: the types recall/candidates returns
    typed = ("SELECT %(id)s::uuid::text, ARRAY['a', NULL, 'b']::text[], %(at)s::timestamptz, 0.25::float8, 0.5::real,"
             " true, 3::smallint, 7::bigint, NULL::int, ARRAY[1, 2]::int[], 0.7::numeric(3, 2)" + " " * 5000)
    typed_params = {"id": "5b7c1a52-6c1e-4a53-9a51-0d2f3e4a5b6c", "at": "2023-05-08 13:56:00+00"}
    cursor = database.execute_positional(conn, typed, typed_params)
    assert cursor.pgresult.fformat(0) == psycopg.pq.Format.BINARY
    assert cursor.fetchall() == conn.execute(typed, typed_params).fetchall()
    # a time as its binary form's microseconds since 2000-01-01 UTC, exact (recall's validity starts)
    epoch = datetime(2000, 1, 1, tzinfo=UTC)
    times = ("SELECT %(at)s::timestamptz, %(at)s::timestamptz + interval '7 microseconds', 1::int8" + " " * 5000)
    for at in ("2023-05-08 13:56:00.123456+02", "1970-01-01 00:00:00+00", "8999-12-31 23:59:59.999999+00"):
        (moment, later, plain), = conn.execute(times, {"at": at}).fetchall()
        assert database.execute_positional(conn, times, {"at": at}, times_as_micros=True).fetchall() == [
            ((moment - epoch) // timedelta(microseconds=1), (later - epoch) // timedelta(microseconds=1), plain)]
    with pytest.raises(ValueError, match="literal %"):
        database.positional("SELECT 'a%%' || %(a)s")


def test_a_connection_keeps_its_own_plans_for_a_bounded_number_of_valid_projects(clean, monkeypatch):
    """project_plan gives the statement as it is until keep_project_plans lets the connection keep the project's
    own, its name a quoted literal; it lets in at most PROJECT_PLANS_PER_CONNECTION projects, never a name that is
    not a valid project (it would become SQL), and another connection counts its own."""
    monkeypatch.setattr(V, "PROJECT_PLANS_PER_CONNECTION", 2)
    statement = "SELECT %(project)s::text AS project, %(k)s::int AS k"
    own = "SELECT 'acme'::text AS project, %(k)s::int AS k"
    names = ("acme", "o'brien", "x%(k)s", "beta", "gamma")
    with psycopg.connect(clean) as first, psycopg.connect(clean) as second:
        assert database.project_plan(first, statement, "acme") == (statement, False)
        for project in names:
            database.keep_project_plans(first, project, 1)
        assert {p: database.project_plan(first, statement, p) for p in names} == {
            "acme": (own, True), "o'brien": (statement, False), "x%(k)s": (statement, False),
            "beta": ("SELECT 'beta'::text AS project, %(k)s::int AS k", True), "gamma": (statement, False)}
        assert first.execute(own, {"k": 1}).fetchone() == ("acme", 1)
        assert database.project_plan(second, statement, "acme") == (statement, False)
        database.keep_project_plans(second, "gamma", 1)
        assert database.project_plan(second, statement, "gamma")[1]


def test_migrations_are_recorded_once(clean):
    """Re-running migrate applies nothing new: every numbered file is recorded, and every function file with the
    checksum of its text."""
    assert database.migrate(clean) == []
    with psycopg.connect(clean) as conn:
        recorded = [row[0] for row in conn.execute("SELECT name FROM schema_migrations ORDER BY version")]
        functions = dict(conn.execute("SELECT name, checksum FROM schema_functions").fetchall())
    assert recorded == [path.name for path in database.migration_files()]
    assert functions == {path.name: hashlib.sha256(path.read_text().encode()).hexdigest()
                         for path in database.function_files()}


def test_each_function_file_is_the_one_function_it_is_named_after():
    """sql/functions/<name>.sql is the current definition of the function <name> and nothing else: what migrate()
    applies again after the numbered migrations is that one statement, whole."""
    files = database.function_files()
    assert files, "no function files shipped"
    for path in files:
        statement = re.sub(r"^(--[^\n]*\n)+", "", path.read_text())
        assert re.fullmatch(rf"CREATE OR REPLACE FUNCTION {path.name[:-4]}\(.*?\$\$;\n", statement, re.S), path.name


def test_the_newest_migration_naming_a_function_file_records_its_text():
    """Each edit of a function file comes with a numbered migration that says why: a process of the release before,
    at the same newest migration, would otherwise put its copy back at every connect (an attacker's pass ran two
    such builds in turn), so the newest migration naming sql/functions/<name>.sql records the file's SHA-256."""
    for path in database.function_files():
        naming = [m for m in database.migration_files() if f"sql/functions/{path.name}" in m.read_text()]
        assert naming, f"no migration names sql/functions/{path.name}"
        checksum = hashlib.sha256(path.read_text().encode()).hexdigest()
        assert f"sql/functions/{path.name} sha256 {checksum}" in naming[-1].read_text(), (
            f"{path.name} changed since {naming[-1].name} recorded it: add a numbered migration that says why and "
            f"records `-- sql/functions/{path.name} sha256 {checksum}`")


def older_fold() -> str:
    """sql/040's memory_fold, the copy before its file."""
    return function_in_migration("memory_fold", "040_folds_judge_each_row_by_its_key_and_capture.sql")


def test_a_function_file_is_applied_again_when_its_text_changes_or_a_numbered_migration_runs(clean):
    """A function file is the current definition: applied again once its text changes, once the function was
    replaced by hand, and after a numbered migration (one run by hand too), since a migration may carry an older copy
    of the function (every one up to sql/041 did), in that migration's transaction; a build older than the store
    applies none of them, so a process of the release before, still running through a rolling deploy, never puts its
    copy back."""
    fold = "SELECT pg_get_functiondef('memory_fold'::regproc)"
    every_file = [f"functions/{path.name}" for path in database.function_files()]
    last = database.migration_files()[-1].name
    with psycopg.connect(clean, autocommit=True) as conn:
        current = conn.execute(fold).fetchone()[0]
        try:
            conn.execute(older_fold())
            assert conn.execute(fold).fetchone()[0] != current
            conn.execute("UPDATE schema_functions SET checksum = 'edited since'")
            assert database.migrate(clean) == every_file
            assert conn.execute(fold).fetchone()[0] == current
            conn.execute(older_fold())  # replaced by hand: undone at the next connect
            assert database.migrate(clean) == ["functions/memory_fold.sql"]
            assert conn.execute(fold).fetchone()[0] == current
            conn.execute("UPDATE schema_functions SET migrated_to = migrated_to - 1")  # applied before the last one,
            conn.execute(older_fold())  # which was run by hand with an older copy
            assert database.migrate(clean) == every_file
            assert conn.execute(fold).fetchone()[0] == current
            conn.execute("DELETE FROM schema_migrations WHERE name = %s", (last,))  # a store from before the last one
            conn.execute("UPDATE schema_functions SET migrated_to = migrated_to - 1")  # (migrations are idempotent)
            conn.execute(older_fold())
            assert database.migrate(clean) == [last, *every_file]
            assert conn.execute(fold).fetchone()[0] == current
            upgrades = {row[0] for row in conn.execute(  # one transaction: no write falls between the two
                "SELECT xmin::text FROM schema_migrations WHERE name = %s"
                " UNION SELECT xmin::text FROM schema_functions", (last,))}
            assert len(upgrades) == 1, upgrades
            conn.execute("INSERT INTO schema_migrations (version, name) VALUES (999, '999_a_later_release.sql')")
            conn.execute(older_fold())  # the later release's copy, which this older build must leave
            conn.execute("UPDATE schema_functions SET checksum = 'the later release''s'")
            assert database.migrate(clean) == []
            assert conn.execute(fold).fetchone()[0] != current
        finally:
            conn.execute("DELETE FROM schema_migrations WHERE version = 999")
            conn.execute("UPDATE schema_functions SET checksum = 'restored'")
            database.migrate(clean)
        assert conn.execute(fold).fetchone()[0] == current
        assert database.migrate(clean) == []


def sql_functions_before_034() -> str:
    """sql/001's and sql/027's definitions of the functions sql/034 replaced, read from those migrations."""
    return "\n".join(function_in_migration(name, migration) for name, migration in (
        ("memory_text_of", "001_ledger.sql"), ("memory_private_entries", "027_full_text_matches.sql"),
        ("memory_unit_entries", "027_full_text_matches.sql")))


def test_the_entries_index_sql_027s_functions_built_finds_through_sql_034s_what_a_scan_finds(mem, conn):
    """sql/034 made the functions the entries index and tsv call PL/pgSQL without rebuilding the index: entries
    the SQL bodies filed (shared, private, a NULL persona, an empty audience, stop words only) must be what the new
    functions give, or a reader's match would miss units or find others' (each lexeme read through the index and by
    a scan of the table)."""
    note = dict(project="acme", kind="note", type="semantic", feed="test")
    mem.remember(**note, title="Kettle", body="The kettle is descaled monthly.", keywords=["kitchen", "descale"])
    mem.remember(**note, title="Diary", body="The diary of ana.", visibility=V.VISIBILITY_PRIVATE, persona="ana")
    mem.remember(**note, title="Notes", body="The notes of c.d.", visibility=V.VISIBILITY_PRIVATE, persona="c.d")
    mem.remember(**note, title="Empty", body="An empty audience.")
    mem.remember(**note, title="The", body="Of and the.")
    entries = "SELECT title, memory_unit_entries(project, private_to, tsv), memory_text_of(keywords) FROM memory_units"
    with conn.transaction(force_rollback=True):
        conn.execute("UPDATE memory_units SET private_to = ARRAY['bo', NULL] WHERE title = 'Kettle'")
        conn.execute("UPDATE memory_units SET private_to = '{}' WHERE title = 'Empty'")
        conn.execute(sql_functions_before_034())
        conn.execute("REINDEX INDEX memory_units_entries")
        filed = sorted(conn.execute(entries).fetchall())
        conn.execute((database.sql_dir() / "034_entries_compiled_once.sql").read_text())
        assert sorted(conn.execute(entries).fetchall()) == filed
        lexemes = [row[0] for row in conn.execute(
            "SELECT DISTINCT unnest(tsvector_to_array(memory_unit_entries(project, private_to, tsv)))"
            " FROM memory_units")]
        found = {}
        for way, setting in (("index", "enable_seqscan"), ("scan", "enable_bitmapscan")):
            conn.execute(f"SET LOCAL {setting} = off")
            scans = conn.execute("SELECT pg_stat_get_xact_numscans('memory_units_entries'::regclass)").fetchone()[0]
            found[way] = {lexeme: conn.execute("SELECT array_agg(title ORDER BY title) FROM memory_units WHERE"
                                               " memory_unit_entries(project, private_to, tsv) @@ %s::tsquery",
                                               (f"'{lexeme}'",), prepare=False).fetchone()[0]
                          for lexeme in lexemes}  # planned each time: a prepared plan would outlive the setting
            used = conn.execute("SELECT pg_stat_get_xact_numscans('memory_units_entries'::regclass)").fetchone()[0]
            assert (used > scans) == (way == "index"), way
            conn.execute(f"RESET {setting}")
    assert found["index"] == found["scan"]
    assert [(title, len(tsv) > 0, text) for title, tsv, text in filed] == [
        ("Diary", True, ""), ("Empty", True, ""), ("Kettle", True, "kitchen descale"), ("Notes", True, ""),
        ("The", False, "")]
    assert found["index"]["acme/@ana diari"] == ["Diary"] and found["index"]["acme/@c.d note"] == ["Notes"]
    assert "acme/kettl" not in found["index"] and found["index"]["acme/@bo kettl"] == ["Kettle"]


def test_a_function_of_the_callers_search_path_never_takes_the_place_of_one_the_units_text_is_filed_by(conn):
    """sql/001's memory_text_of named array_to_string unqualified, parsed again with each caller's search_path: a
    public.array_to_string(text[], text) (or one in a schema put first) took its place in every unit's tsv (an
    attacker's review of sql/034 found it); sql/034's bodies name pg_catalog's functions and operators."""
    with conn.transaction(force_rollback=True):
        conn.execute("CREATE SCHEMA evil")
        for schema in ("public", "evil"):
            conn.execute(f"CREATE FUNCTION {schema}.array_to_string(text[], text) RETURNS text LANGUAGE sql"
                         " IMMUTABLE AS $$ SELECT 'hijacked' $$")
        conn.execute("CREATE FUNCTION evil.ok(integer, integer) RETURNS boolean LANGUAGE sql IMMUTABLE"
                     " AS $$ SELECT true $$")
        conn.execute("CREATE OPERATOR evil.= (LEFTARG = integer, RIGHTARG = integer, FUNCTION = evil.ok)")
        for path in ("public, pg_catalog", "evil, pg_catalog, public"):
            conn.execute(f"SET LOCAL search_path = {path}")
            assert conn.execute("SELECT public.memory_text_of(ARRAY['kettle', 'descale']),"
                                " public.memory_unit_entries('acme', NULL, to_tsvector('english', 'kettles'))"
                                ).fetchone() == ("kettle descale", "'acme/kettl'"), path


def test_no_function_the_units_index_or_generated_column_calls_is_a_sql_body_parsed_for_every_write(conn):
    """The planner tries to inline a LANGUAGE sql function each time it prepares an expression that calls it,
    parsing its body again, which an index expression and a generated column are for every statement that writes a
    row (sql/034: ~10 % of remember()'s server CPU with the SQL function's run); PL/pgSQL is compiled once per
    session."""
    called = dict(conn.execute(
        "SELECT DISTINCT p.proname, l.lanname FROM pg_depend d"
        " JOIN pg_proc p ON d.refclassid = 'pg_proc'::regclass AND p.oid = d.refobjid"
        " JOIN pg_language l ON l.oid = p.prolang"
        " LEFT JOIN pg_index i ON d.classid = 'pg_class'::regclass AND i.indexrelid = d.objid"
        " LEFT JOIN pg_attrdef a ON d.classid = 'pg_attrdef'::regclass AND a.oid = d.objid"
        " WHERE coalesce(i.indrelid, a.adrelid) IN (SELECT oid FROM pg_class WHERE relname LIKE 'memory%')"
        " AND p.pronamespace = 'public'::regnamespace").fetchall())
    called["memory_private_entries"] = conn.execute(  # the one memory_unit_entries calls
        "SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang"
        " WHERE p.proname = 'memory_private_entries'").fetchone()[0]
    assert {"memory_text_of", "memory_unit_entries", "memory_private_entries"} <= called.keys()
    assert [name for name, language in called.items() if language == "sql"] == [], called


# --- Self-healing (issue #13) ----------------------------------------------------------------------------------

def test_a_zombie_or_a_finished_process_counts_as_dead():
    """A process killed but not yet reaped still answers signal 0: the holder list and the restart check must
    treat it as dead, or a SIGKILLed holder (or postmaster) would count as running."""
    child = subprocess.Popen(["sleep", "30"])
    assert database.process_alive(child.pid) and database.process_alive(os.getpid())
    child.kill()
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":  # killed, not reaped
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not database.process_alive(child.pid)
    child.wait()
    assert not database.process_alive(child.pid) and not database.process_alive(0)


def test_the_holder_list_drops_the_pids_of_dead_holders(tmp_path):
    """pgserver stops the server when the list it reads holds only the exiting process: dead pids never count."""
    child = subprocess.Popen(["true"])
    child.wait()
    path = tmp_path / ".handle_pids.json"
    path.write_text(json.dumps([child.pid, os.getpid()]))
    holders = database.LiveHolders(path)
    assert holders.get_and_add(os.getpid()) == [os.getpid()]
    assert json.loads(path.read_text()) == [os.getpid()]
    assert holders.get_and_remove(os.getpid()) == [os.getpid()]  # the last living holder: pgserver stops it
    assert json.loads(path.read_text()) == []
    path.write_text('[12')  # a holder killed in the middle of a write
    assert holders.get_and_add(os.getpid()) == [] and json.loads(path.read_text()) == [os.getpid()]


@pytest.mark.parametrize(("memory", "shared_buffers"), [(2 * 2**30, "512MB"), (256 * 2**20, "128MB"),
                                                    (64 * 2**30, "8192MB")])
def test_the_embedded_servers_page_cache_is_a_share_of_the_memory_within_bounds(memory, shared_buffers):
    """PostgreSQL's 128 MB held a third of a 100,000-unit project's vectors and graph: the embedded server takes a
    quarter of the machine's memory, at least the default and at most 8 GB."""
    assert database.embedded_settings(memory) == {"shared_buffers": shared_buffers}


def test_the_embedded_settings_are_included_once_and_rewritten_at_each_start(tmp_path, monkeypatch):
    """Each start rewrites the settings file for the memory it finds; postgresql.conf includes it once."""
    (tmp_path / "postgresql.conf").write_text("shared_buffers = 128MB\n")
    for memory, expected in ((2 * 2**30, "512MB"), (4 * 2**30, "1024MB")):
        monkeypatch.setattr(database, "machine_memory_bytes", lambda memory=memory: memory)
        database.write_embedded_settings(tmp_path)
        assert (tmp_path / V.EMBEDDED_SETTINGS_FILE).read_text() == f"shared_buffers = '{expected}'\n"
    included = (tmp_path / "postgresql.conf").read_text().splitlines()
    assert included.count(f"include_if_exists = '{V.EMBEDDED_SETTINGS_FILE}'") == 1
    assert included[0] == "shared_buffers = 128MB"  # after the default: the included file's value wins
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory_assets.conf", "postgresql.conf"]  # no partial


def test_the_embedded_server_runs_with_the_packages_settings(database_url):
    """The session's embedded server was started through embedded_server, which wrote its settings first."""
    if os.environ.get("DATABASE_URL"):
        pytest.skip("an external server keeps its own settings")
    with psycopg.connect(database_url) as conn:
        megabytes, source = conn.execute("SELECT setting::bigint * 8192 / 2^20, sourcefile FROM pg_settings"
                                         " WHERE name = 'shared_buffers'").fetchone()
    assert database.embedded_settings(database.machine_memory_bytes()) == {"shared_buffers": f"{megabytes:.0f}MB"}
    assert source.endswith(V.EMBEDDED_SETTINGS_FILE)


def test_a_process_attaching_to_a_running_server_leaves_its_settings_alone(database_url):
    """The settings apply only at a start: another process attaching to the running server writes nothing."""
    if os.environ.get("DATABASE_URL"):
        pytest.skip("an external server keeps its own settings")
    pgdata = Path(os.environ[V.HOME_ENV]) / "pg"
    written = [(pgdata / name).stat().st_mtime_ns for name in (V.EMBEDDED_SETTINGS_FILE, "postgresql.conf")]
    attach = "import sys; from memory_assets import database; database.embedded_server(sys.argv[1])"
    subprocess.run([sys.executable, "-c", attach, os.environ[V.HOME_ENV]], check=True, timeout=60)
    assert [(pgdata / name).stat().st_mtime_ns for name in (V.EMBEDDED_SETTINGS_FILE, "postgresql.conf")] == written


def test_the_lock_files_of_a_crashed_postmaster_are_found(tmp_path):
    """Both lock files name the dead postmaster's pid; a restart removes them or PostgreSQL refuses to start."""
    (tmp_path / "postmaster.pid").write_text(f"4242\n{tmp_path}\n1700000000\n5432\n{tmp_path}\n\n  1 2\nready\n")
    assert database.postmaster_pid(tmp_path) == 4242
    assert database.lock_files(tmp_path) == [tmp_path / ".s.PGSQL.5432.lock", tmp_path / "postmaster.pid"]
    assert database.lock_files(tmp_path / "missing") == [] and database.postmaster_pid(tmp_path / "x") is None


def test_a_connection_terminated_a_moment_ago_is_never_handed_out(clean):
    """pg_terminate_backend only signals the backend: its error and end of stream reach the socket a moment later,
    so a pool that asked the socket instead of the server handed the dead connection out right after (220 of 300
    requests failed). The check's round trip waits for the server: every request at once after a terminate works."""
    pool = database.open_pool(clean, max_size=1)
    try:
        with psycopg.connect(clean, autocommit=True) as admin:
            for _ in range(50):
                with pool.connection() as conn:
                    backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
                admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
                with pool.connection() as conn:
                    assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] != backend
    finally:
        pool.close()


def test_a_remember_on_a_connection_terminated_a_moment_ago_is_sent_again_and_says_what_it_did(clean, caplog):
    """remember() takes its connection without the pool's check (a round trip, a ninth of the call): its write is
    the check. Should the connection be gone before the server answered, the write, idempotent by its key, is sent
    again on a checked connection: every call right after a terminate stores its unit once and says so."""
    import memory_assets

    mem = memory_assets.connect(clean, pool_size=1)
    try:
        with psycopg.connect(clean, autocommit=True) as admin, caplog.at_level("INFO", "memory_assets.api"):
            for i in range(30):
                with mem.connection() as conn:
                    backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
                admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
                result = mem.remember(project="acme", kind="env", type="semantic", title=f"Port {i}",
                                      body=f"The relay listens on port {9000 + i}.")
                assert (result.status, result.token) == (V.STATUS_ACTIVE, f"{V.TOKEN_PREFIX}{i + 1}")
            assert admin.execute("SELECT count(*), count(DISTINCT title) FROM memory_units").fetchone() == (30, 30)
        sent_again = [r for r in caplog.records if "sent again" in r.getMessage()]
        assert len(sent_again) >= 20, len(sent_again)  # the write itself met the dead connection, nearly always
    finally:
        mem.close()


READS_CHECKED_BY_THEIR_FIRST_READ = {
    "recall": lambda mem: [hit.token for hit in mem.recall("acme", "relay port")],
    "prompt_block": lambda mem: mem.prompt_block("acme", "relay port", task_id="T-1"),
}


@pytest.mark.parametrize("call", sorted(READS_CHECKED_BY_THEIR_FIRST_READ))
def test_a_read_on_a_connection_terminated_a_moment_ago_is_asked_again_and_says_so(clean, caplog, call):
    """recall() and prompt_block() take their connection without the pool's check too (a round trip, ~5 % of a cached
    LoCoMo recall's samples): their first read, the kill switch and serving model, is the check, and a read may be
    sent twice. Every call right after a terminate answers as on a live connection, its injected events once."""
    import memory_assets

    ask = READS_CHECKED_BY_THEIR_FIRST_READ[call]
    mem = memory_assets.connect(clean, pool_size=1)
    try:
        mem.remember(project="acme", kind="env", type="semantic", title="Relay port",
                     body="The relay listens on port 9000.")
        expected = ask(mem)
        assert f"{V.TOKEN_PREFIX}1" in str(expected)
        with psycopg.connect(clean, autocommit=True) as admin, caplog.at_level("INFO", "memory_assets.api"):
            for _ in range(20):
                with mem.connection() as conn:
                    backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
                admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
                assert ask(mem) == expected
            assert admin.execute("SELECT count(*) FROM memory_events").fetchone()[0] == (call == "prompt_block")
        asked_again = [r for r in caplog.records if r.getMessage().startswith(f"{call}: ") and "sent again" in
                       r.getMessage()]
        assert len(asked_again) >= 10, len(asked_again)  # the first read itself met the dead connection, nearly always
    finally:
        mem.close()


def test_a_remember_whose_connection_breaks_after_an_answer_is_not_sent_again(clean, monkeypatch):
    """Only a call the server never answered is sent again: once it answered (a canon read, a rejection counted),
    the connection was alive when the call began, and the error is the caller's, as any other call's."""
    import memory_assets

    calls = []

    def answers_then_breaks(conn, candidate, **kwargs):
        calls.append(kwargs)
        conn.execute("SELECT 1")
        conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")

    monkeypatch.setattr(capture, "remember", answers_then_breaks)
    mem = memory_assets.connect(clean, pool_size=1)
    try:
        with pytest.raises(psycopg.OperationalError):
            mem.remember(project="acme", kind="env", type="semantic", title="Port", body="The relay listens on 9000.")
        assert len(calls) == 1
    finally:
        mem.close()


def test_a_remember_on_a_pool_open_pool_did_not_make_is_never_sent_again(clean, monkeypatch):
    """Memory takes any psycopg pool: its connections do not note the server's answers, so a broken one never counts
    as unanswered and the call is not sent again (a rejection counted before the break would count twice)."""
    from psycopg_pool import ConnectionPool

    from memory_assets.api import Memory

    calls = []

    def breaks(conn, candidate, **kwargs):
        calls.append(kwargs)
        conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")

    monkeypatch.setattr(capture, "remember", breaks)
    pool = ConnectionPool(clean, min_size=1, max_size=1, kwargs={"autocommit": True})
    with pool, pytest.raises(psycopg.OperationalError):
        Memory(pool, clean).remember(project="acme", kind="env", type="semantic", title="Port",
                                     body="The relay listens on 9000.")
    assert len(calls) == 1


def test_the_pool_replaces_connections_the_server_dropped(clean):
    """A connection the server terminated (a restart, an idle timeout, a failover) is never handed out: the pool
    checks each one, drops every idle one once it finds a broken one, and reconnects on the same request."""
    pool = database.open_pool(clean, max_size=4)
    try:
        assert pool.timeout == V.POOL_TIMEOUT_SECONDS and pool.reconnect_timeout == V.POOL_RECONNECT_TIMEOUT_SECONDS
        # every connection the pool may hold (max_size), so no healthy one it grew meanwhile on a slow machine is
        # handed out first and the sweep below is certain
        with pool.connection() as a, pool.connection() as b, pool.connection() as c, pool.connection() as d:
            backends = [conn.execute("SELECT pg_backend_pid()").fetchone()[0] for conn in (a, b, c, d)]
        with psycopg.connect(clean, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (backends,))
            deadline = time.monotonic() + 5
            while admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (backends,)).fetchone()[0]:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
            assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] not in backends
        assert pool.get_stats().get("connections_lost", 0) >= 2  # the other idle ones went in the same sweep
    finally:
        pool.close()


def test_a_lone_caller_after_a_burst_keeps_the_connection_it_returned_last(clean):
    """After a burst opened several connections, psycopg_pool handed a lone caller the one idle longest: each of its
    calls ran on another backend, CPU caches cold (903 -> 767 remember() calls/s after eight writers). The pool hands
    out the connection returned last."""
    pool = database.open_pool(clean, max_size=4)
    try:
        pool.wait()  # the first connection made: a burst waiting for it grows the pool by one more on a slow machine
        with pool.connection() as a, pool.connection() as b, pool.connection() as c:
            burst = [conn.execute("SELECT pg_backend_pid()").fetchone()[0] for conn in (a, b, c)]
        opened = pool.get_stats()["pool_size"]
        lone = set()
        for _ in range(9):
            with pool.connection() as conn:
                lone.add(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
        assert len(lone) == 1 and lone <= set(burst) and pool.get_stats()["pool_size"] == opened >= 3
    finally:
        pool.close()


def test_statistics_are_refreshed_once_writes_pass_autovacuums_threshold_and_not_for_a_few_rows(
        analysed_by_refreshes_only, clean):
    """A bulk write planned on the statistics of a table it has grown: refreshed at once past autovacuum's own
    threshold (50 rows + 10% of those counted), left alone below it, counted from this connection's own writes
    at once and from another's by the rows it says it wrote; never inside the caller's transaction."""
    conn = analysed_by_refreshes_only
    assert units_counted(conn) < 0  # never analysed counts as stale
    assert database.refresh_statistics(conn, V.UNITS_TABLE) and units_counted(conn) == 0
    capture.remember_many(conn, service_facts(20))
    assert not database.refresh_statistics(conn, V.UNITS_TABLE) and units_counted(conn) == 0
    capture.remember_many(conn, service_facts(180, offset=20))
    assert database.refresh_statistics(conn, V.UNITS_TABLE) and units_counted(conn) == 200  # its own, flushed
    assert not database.refresh_statistics(conn, V.UNITS_TABLE, written=60)  # under 50 + 10% of 200
    with psycopg.connect(clean, autocommit=True) as other:  # another backend's counters may arrive late
        capture.remember_many(other, service_facts(71, offset=200))
    assert database.refresh_statistics(conn, V.UNITS_TABLE, written=71) and units_counted(conn) == 271
    with conn.transaction(), pytest.raises(RuntimeError, match="transactions of their own"):
        database.refresh_statistics(conn, V.UNITS_TABLE, written=1000)


def test_a_table_no_analyze_has_read_is_analysed_once_and_never_inside_the_callers_transaction(
        analysed_by_refreshes_only):
    """remember() has a young store's units analysed at a project's 50th unit (capture.remember): only while no
    ANALYZE or VACUUM has read them, since their statistics are autovacuum's to keep after that, and never inside the
    caller's transaction, whose end its lock would wait for, nor on a connection that is not autocommit."""
    conn = analysed_by_refreshes_only
    capture.remember_many(conn, service_facts(20))
    with conn.transaction():
        assert not database.analyse_if_never_analysed(conn, V.UNITS_TABLE)
    conn.autocommit = False  # a connection of another kind of pool: not a read, so no transaction left open
    try:
        assert not database.analyse_if_never_analysed(conn, V.UNITS_TABLE)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    finally:
        conn.autocommit = True
    assert units_counted(conn) < 0
    assert database.analyse_if_never_analysed(conn, V.UNITS_TABLE) and units_counted(conn) == 20
    capture.remember_many(conn, service_facts(200, offset=20))
    assert not database.analyse_if_never_analysed(conn, V.UNITS_TABLE) and units_counted(conn) == 20


def test_a_refresh_merges_the_full_text_indexs_pending_entries(analysed_by_refreshes_only):
    """A bulk write leaves its rows' lexemes in the GIN index's pending list, which the planner prices into every
    scan of it: after a 10,000-unit load a reader's full-text leg read the whole table (7.3 ms) until
    gin_clean_pending_list merged them (0.06 ms). The refresh after a bulk write merges them (after its ANALYZE has
    committed); without one they stay pending."""
    conn = analysed_by_refreshes_only
    capture.remember_many(conn, service_facts(300))
    assert database.refresh_statistics(conn, V.UNITS_TABLE)
    assert full_text_merged(conn) == 0  # nothing left to merge
    capture.remember_many(conn, service_facts(300, offset=300))
    assert full_text_merged(conn) > 0  # the write's own entries, pending until merged


def test_the_steps_of_a_refresh_run_alone_as_the_import_runs_them(analysed_by_refreshes_only):
    """The import checks the statistics and analyses beside its last batch's fold, and merges the pending entries
    after that fold: the ANALYZE alone merges nothing, the merge alone analyses nothing, a refresh under the
    threshold does neither, and none of them runs inside the caller's transaction."""
    conn = analysed_by_refreshes_only
    capture.remember_many(conn, service_facts(300))
    assert database.statistics_stale(conn, V.UNITS_TABLE) and database.analyse(conn, V.UNITS_TABLE)
    assert units_counted(conn) == 300 and not database.statistics_stale(conn, V.UNITS_TABLE)
    assert full_text_merged(conn) > 0  # the ANALYZE left the write's entries pending
    capture.remember_many(conn, service_facts(20, offset=300))  # under 50 + 10% of 300
    assert not database.refresh_statistics(conn, V.UNITS_TABLE, written=20)
    assert full_text_merged(conn) > 0  # nor did a refresh under the threshold merge them
    capture.remember_many(conn, service_facts(100, offset=320))
    assert database.merge_gin_pending(conn, V.UNITS_TABLE)
    assert full_text_merged(conn) == 0 and units_counted(conn) == 300
    assert database.refresh_statistics(conn, V.UNITS_TABLE, written=100) and units_counted(conn) == 420
    for step in (database.statistics_stale, database.analyse, database.merge_gin_pending):
        with conn.transaction(), pytest.raises(RuntimeError, match="transactions of their own"):
            step(conn, V.UNITS_TABLE)


PAYLOAD_COLUMNS = ("title", "body", "keywords", "created_by", "updated_by", "updated_at")
PLANNED_BY = ("project", "number", "kind", "type", "status", "content_hash", "valid_from", "private_to", "tsv")


def test_a_refresh_samples_the_columns_plans_are_chosen_by_and_not_the_payload(analysed_by_refreshes_only):
    """ANALYZE skips the units' text and bookkeeping (sql/023: a third of its time at 40k units), and keeps the
    statistics of every column recall's and the fold's statements select, join or search by."""
    conn = analysed_by_refreshes_only
    capture.remember_many(conn, service_facts(200))
    assert database.refresh_statistics(conn, V.UNITS_TABLE)
    sampled = {row[0] for row in conn.execute(
        "SELECT attname FROM pg_stats WHERE schemaname = current_schema() AND tablename = %s", (V.UNITS_TABLE,))}
    assert sampled.isdisjoint(PAYLOAD_COLUMNS) and set(PLANNED_BY) <= sampled, sampled
    assert not database.refresh_statistics(conn, V.UNITS_TABLE)  # the whole-table ANALYZE still resets the counter


def test_a_refresh_leaves_the_full_text_entries_unsampled_and_a_store_that_sampled_them_forgets_them(
        analysed_by_refreshes_only):
    """ANALYZE computed each sampled unit's full-text entries (~60% of its time at 136,000 units), and with their
    statistics the owner's match read a big project by its key, computing every unit's entries to filter it (1.8x
    slower for words every unit holds): none are kept (sql/028), and a store that sampled them (sql/027) loses them,
    which ANALYZE alone never does."""
    conn = analysed_by_refreshes_only
    sampled = ("SELECT count(*) FROM pg_stats WHERE schemaname = current_schema()"
               " AND tablename = 'memory_units_entries'")
    capture.remember_many(conn, service_facts(200))
    assert database.refresh_statistics(conn, V.UNITS_TABLE)
    assert conn.execute(sampled).fetchone()[0] == 0
    migration = next(p for p in database.migration_files() if p.name.startswith("028_")).read_text()
    with conn.transaction(force_rollback=True):
        conn.execute("ALTER INDEX memory_units_entries ALTER COLUMN 1 SET STATISTICS -1")  # as sql/027 left it
        conn.execute("ANALYZE memory_units")
        assert conn.execute(sampled).fetchone()[0] == 1
        conn.execute("ALTER INDEX memory_units_entries ALTER COLUMN 1 SET STATISTICS 0")
        conn.execute("ANALYZE memory_units")
        assert conn.execute(sampled).fetchone()[0] == 1  # the old statistics stay
        conn.execute(migration)
        assert conn.execute(sampled).fetchone()[0] == 0
        conn.execute("ANALYZE memory_units")
        assert conn.execute(sampled).fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM memory_units WHERE memory_unit_entries(project, private_to, tsv)"
                            " @@ 'acme/servic'::tsquery").fetchone()[0] == 200


def test_statistics_being_refreshed_elsewhere_leave_a_write_waiting_at_most_the_lock_timeout(
        analysed_by_refreshes_only, clean):
    """An ANALYZE or VACUUM already running on the table holds its lock: the refresh gives up after
    ANALYZE_LOCK_TIMEOUT_MS, leaves the table to autovacuum and the connection usable, never blocking a write."""
    conn = analysed_by_refreshes_only
    capture.remember_many(conn, service_facts(100))
    with psycopg.connect(clean) as other:
        other.execute("LOCK TABLE memory_units IN SHARE UPDATE EXCLUSIVE MODE")  # what VACUUM and ANALYZE take
        counted = units_counted(conn)
        start = time.monotonic()
        assert not database.refresh_statistics(conn, V.UNITS_TABLE, written=100)
        waited = time.monotonic() - start
        assert V.ANALYZE_LOCK_TIMEOUT_MS / 1000 <= waited < V.ANALYZE_LOCK_TIMEOUT_MS / 1000 + 2
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.execute("SHOW lock_timeout").fetchone()[0] == "0"  # set for the ANALYZE's transaction only
        assert units_counted(conn) == counted
    assert database.refresh_statistics(conn, V.UNITS_TABLE, written=100) and units_counted(conn) == 100


def test_application_connections_read_committed_whatever_the_servers_default(clean):
    """A statement that waited for a lock must read what committed meanwhile (the kill switch's drain, the counter
    rows' numbering); a server whose default is REPEATABLE READ (an attacker's pass set it) still gives the
    application READ COMMITTED."""
    with psycopg.connect(clean, autocommit=True) as admin:
        name = psycopg.sql.Identifier(admin.execute("SELECT current_database()").fetchone()[0])
        admin.execute(psycopg.sql.SQL("ALTER DATABASE {} SET default_transaction_isolation = 'repeatable read'")
                      .format(name))
        try:
            with psycopg.connect(clean) as plain:
                assert plain.execute("SHOW transaction_isolation").fetchone()[0] == "repeatable read"
            with psycopg.connect(clean, **database.connection_kwargs()) as app:
                assert app.execute("SHOW transaction_isolation").fetchone()[0] == "read committed"
        finally:
            admin.execute(psycopg.sql.SQL("ALTER DATABASE {} RESET default_transaction_isolation").format(name))
