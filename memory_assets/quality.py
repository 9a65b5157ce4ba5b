"""Data-quality probes over the ledger, shared by the Dagster checks, the CLI and the tests."""

from __future__ import annotations

import warnings
from datetime import date

import pandas as pd
import psycopg

from memory_assets import gates
from memory_assets import vocabulary as V


def duplicate_live_units(conn: psycopg.Connection) -> list[list]:
    """Groups of live unit ids sharing (project, kind, content hash); empty when invariant 4 holds."""
    rows = conn.execute(
        "SELECT array_agg(id ORDER BY number) FROM memory_units "
        f"WHERE status IN {V.LIVE_STATUS_SQL} "
        "GROUP BY project, kind, content_hash HAVING count(*) > 1"
    ).fetchall()
    return [row[0] for row in rows]


def units_with_wrong_audience(conn: psycopg.Connection) -> list[str]:
    """Units whose private_to (what recall filters on) disagrees with their sources: shown to the wrong readers.

    Only units with a private source or a non-NULL private_to can disagree, so both partial indexes bound the scan.
    """
    rows = conn.execute(
        f"SELECT id::text FROM memory_units WHERE status IN {V.LIVE_STATUS_SQL} "
        "AND (private_to IS NOT NULL OR id IN "
        f"(SELECT unit_id FROM memory_sources WHERE visibility = '{V.VISIBILITY_PRIVATE}')) "
        "AND private_to IS DISTINCT FROM memory_unit_audience(id)").fetchall()
    return [r[0] for r in rows]


def units_with_secrets(conn: psycopg.Connection) -> list:
    """Ids of live units on which the secret gate fires today."""
    offending = []
    with conn.transaction(), conn.cursor(name="live_units_secret_scan") as cur:
        cur.execute(
            f"SELECT id, title, body, paths, keywords FROM memory_units WHERE status IN {V.LIVE_STATUS_SQL}"
        )
        for unit_id, title, body, paths, keywords in cur:
            if gates.has_secret("\n".join([title, body, *paths, *keywords])):
                offending.append(unit_id)
    return offending


def units_of_days(conn: psycopg.Connection, first: date, last: date) -> pd.DataFrame:
    """The units created on the given UTC days with their source counts, as a frame for expectations."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT u.id::text, u.project, u.kind, u.type, u.status, char_length(u.title) AS title_chars, "
            "char_length(u.body) AS body_chars, u.confidence, u.importance, u.trust, u.created_by, "
            "(SELECT count(*) FROM memory_sources s WHERE s.unit_id = u.id) AS sources "
            "FROM memory_units u WHERE (u.created_at AT TIME ZONE 'UTC')::date BETWEEN %s AND %s",
            (first, last),
        )
        columns = [c.name for c in cur.description]
        return pd.DataFrame(cur.fetchall(), columns=columns)


def units_suite():
    """The great-expectations suite a day's units must meet."""
    import great_expectations as gx

    from memory_assets import vocabulary as V

    suite = gx.ExpectationSuite(name="ledger_units")
    for column in ("confidence", "importance", "trust"):
        suite.add_expectation(gx.expectations.ExpectColumnValuesToBeBetween(column=column, min_value=0, max_value=1))
    suite.add_expectation(gx.expectations.ExpectColumnValuesToBeBetween(column="title_chars", min_value=1,
                                                                        max_value=V.TITLE_MAX_CHARS))
    suite.add_expectation(gx.expectations.ExpectColumnValuesToBeBetween(column="body_chars", min_value=1,
                                                                        max_value=V.BODY_MAX_CHARS))
    suite.add_expectation(gx.expectations.ExpectColumnValuesToBeBetween(column="sources", min_value=1))
    suite.add_expectation(gx.expectations.ExpectColumnValuesToNotBeNull(column="created_by"))
    suite.add_expectation(gx.expectations.ExpectColumnValuesToBeInSet(column="kind", value_set=list(V.KINDS)))
    suite.add_expectation(gx.expectations.ExpectColumnValuesToBeInSet(column="type", value_set=list(V.TYPES)))
    return suite


def validate_units_frame(frame: pd.DataFrame) -> dict:
    """Run the units suite over a frame: success and the names of failed expectations."""
    if frame.empty:
        return {"success": True, "failed": []}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        context = gx.get_context(mode="ephemeral")
        context.variables.progress_bars = ProgressBarsConfig(globally=False)
        source = context.data_sources.add_pandas("ledger")
        batch = source.add_dataframe_asset("units").add_batch_definition_whole_dataframe("day").get_batch(
            batch_parameters={"dataframe": frame}
        )
        result = batch.validate(units_suite())
    failed = [r.expectation_config.type + ":" + str(r.expectation_config.kwargs.get("column"))
              for r in result.results if not r.success]
    return {"success": bool(result.success), "failed": failed}


def supersession_problems(conn: psycopg.Connection) -> tuple[list[str], list[str]]:
    """Units on a supersession cycle, and superseded units without valid_until."""
    cycles = conn.execute(
        "WITH RECURSIVE walk(start, id, depth) AS ("
        " SELECT id, supersedes_id, 1 FROM memory_units WHERE supersedes_id IS NOT NULL"
        " UNION ALL SELECT w.start, u.supersedes_id, w.depth + 1 FROM walk w JOIN memory_units u ON u.id = w.id"
        "  WHERE u.supersedes_id IS NOT NULL AND w.id <> w.start AND w.depth < 1000)"
        " SELECT DISTINCT start::text FROM walk WHERE id = start").fetchall()
    open_ended = conn.execute(
        "SELECT id::text FROM memory_units WHERE status = 'superseded' AND valid_until IS NULL").fetchall()
    return [r[0] for r in cycles], [r[0] for r in open_ended]


def tombstones_with_text(conn: psycopg.Connection) -> list[str]:
    """Forgotten units that still hold text in the ledger or the inbox."""
    rows = conn.execute(
        "SELECT u.id::text FROM memory_units u WHERE u.status = 'forgotten' AND (u.title <> '' OR u.body <> '' "
        " OR u.paths <> '{}' OR u.keywords <> '{}' OR u.tsv <> ''::tsvector OR EXISTS (SELECT 1 FROM memory_inbox i "
        " WHERE i.unit_id = u.id AND (i.title <> '' OR i.body <> '' OR i.paths <> '{}' OR i.keywords <> '{}')))"
    ).fetchall()
    return [r[0] for r in rows]


def units_without_decay(conn: psycopg.Connection, day: date) -> list[str]:
    """Live units created before the day's end that have no decay score for the day."""
    rows = conn.execute(
        f"SELECT u.id::text FROM memory_units u WHERE u.status IN {V.LIVE_STATUS_SQL} "
        "AND u.created_at < (%s::date + 1)::timestamptz "
        "AND NOT EXISTS (SELECT 1 FROM decay_scores d WHERE d.day = %s AND d.unit_id = u.id)", (day, day)).fetchall()
    return [r[0] for r in rows]


def unlinked_consolidations(conn: psycopg.Connection) -> list[str]:
    """Consolidated units missing a source for a member, or with a member that does not point back."""
    rows = conn.execute(
        "SELECT c.consolidated_unit::text FROM consolidation_clusters c, unnest(c.members) AS m(id) "
        "WHERE NOT EXISTS (SELECT 1 FROM memory_sources s WHERE s.unit_id = c.consolidated_unit AND s.task_id = m.id::text) "
        "OR NOT EXISTS (SELECT 1 FROM memory_units u WHERE u.id = m.id AND u.consolidated_into = c.consolidated_unit) "
        "GROUP BY 1").fetchall()
    return [r[0] for r in rows]
