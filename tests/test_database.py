"""The database module: every named query prepares against the real schema; migrations and spellings hold."""

from __future__ import annotations

import re

import psycopg
import pytest

from memory_assets import database
from memory_assets import vocabulary as V

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
    assert "ledger/fold_inbox" in names and "recall/sparse" in names
    assert not any(name.split("/")[1].startswith("_") for name in names)
    assert "{ledger/_unfolded_inbox}" not in database.query("ledger/link_inbox")
    assert "i.unit_id IS NULL" in database.query("ledger/link_inbox")


def test_placeholders_are_spelled_from_the_vocabulary():
    """{live_statuses} in a file is the vocabulary's tuple, so the fold can never drift from the live index."""
    assert f"WHERE status IN {database.sql_list(V.LIVE_STATUSES)}" in database.query("ledger/fold_inbox")
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


def test_migrations_are_recorded_once(clean):
    """Re-running migrate applies nothing new: every numbered file is recorded."""
    assert database.migrate(clean) == []
    with psycopg.connect(clean) as conn:
        recorded = [row[0] for row in conn.execute("SELECT name FROM schema_migrations ORDER BY version")]
    assert recorded == [path.name for path in database.migration_files()]
