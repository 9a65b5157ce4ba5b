"""Data-quality probes over the ledger, vectors and bundles, shared by the Dagster checks, the CLI and the tests."""

from __future__ import annotations

import json
import warnings
from datetime import date
from typing import TYPE_CHECKING, Any

import pandas as pd
import psycopg

from memory_assets import bundle, decay, embeddings, gates
from memory_assets import vocabulary as V
from memory_assets.database import query

if TYPE_CHECKING:
    import great_expectations as gx


def duplicate_live_units(conn: psycopg.Connection[Any]) -> list[list[Any]]:
    """Groups of live unit ids sharing (project, kind, content hash); empty when invariant 4 holds."""
    rows = conn.execute(query("quality/duplicate_live_units")).fetchall()
    return [row[0] for row in rows]


def units_with_wrong_audience(conn: psycopg.Connection[Any]) -> list[str]:
    """Units whose private_to (what recall filters on) disagrees with their sources: shown to the wrong readers.

    Only units with a private source or a non-NULL private_to can disagree, so both partial indexes bound the scan.
    """
    rows = conn.execute(query("quality/units_with_wrong_audience")).fetchall()
    return [r[0] for r in rows]


def units_with_secrets(conn: psycopg.Connection[Any]) -> list[Any]:
    """Ids of units holding text on which the secret gate fires today, read as it read them when they were written:
    their text with their sources' ids."""
    offending = []
    with conn.transaction(), conn.cursor(name="stored_units_secret_scan") as cur:
        cur.execute(query("quality/stored_unit_texts"))
        for unit_id, title, body, paths, keywords, provenance_ids in cur:
            if gates.has_secret("\n".join([title, body, *paths, *keywords, *provenance_ids])):
                offending.append(unit_id)
    return offending


def units_of_days(conn: psycopg.Connection[Any], first: date, last: date) -> pd.DataFrame:
    """The units created on the given UTC days with their source counts, as a frame for expectations."""
    with conn.cursor() as cur:
        cur.execute(query("quality/units_of_days"), {"first": first, "last": last})
        columns = [c.name for c in cur.description or []]
        return pd.DataFrame(cur.fetchall(), columns=columns)


def units_suite() -> gx.ExpectationSuite:
    """The great-expectations suite a day's units must meet."""
    import great_expectations as gx

    suite = gx.ExpectationSuite(name="ledger_units")
    for column in ("confidence", "importance", "trust"):
        suite.add_expectation(gx.expectations.ExpectColumnValuesToBeBetween(column=column, min_value=0, max_value=1))
    # each unit by its own rule: a unit has its text within the limits, a forgotten one (a tombstone) has none
    tombstone = f'status == "{V.STATUS_FORGOTTEN}"'
    for column, limit in (("title_chars", V.TITLE_MAX_CHARS), ("body_chars", V.BODY_MAX_CHARS)):
        suite.add_expectation(gx.expectations.ExpectColumnValuesToBeBetween(
            column=column, min_value=1, max_value=limit, row_condition=f"not ({tombstone})",
            condition_parser="pandas"))
        suite.add_expectation(gx.expectations.ExpectColumnValuesToBeBetween(
            column=column, min_value=0, max_value=0, row_condition=tombstone, condition_parser="pandas"))
    suite.add_expectation(gx.expectations.ExpectColumnValuesToBeBetween(column="sources", min_value=1))
    suite.add_expectation(gx.expectations.ExpectColumnValuesToNotBeNull(column="created_by"))
    suite.add_expectation(gx.expectations.ExpectColumnValuesToBeInSet(column="kind", value_set=list(V.KINDS)))
    suite.add_expectation(gx.expectations.ExpectColumnValuesToBeInSet(column="type", value_set=list(V.TYPES)))
    return suite


def validate_units_frame(frame: pd.DataFrame) -> dict[str, Any]:
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
    failed = [f"{config.type}:{config.kwargs.get('column')}"
              for r in result.results if not r.success and (config := r.expectation_config) is not None]
    return {"success": bool(result.success), "failed": failed}


def supersession_problems(conn: psycopg.Connection[Any]) -> tuple[list[str], list[str]]:
    """Units on a supersession cycle, and superseded units without valid_until."""
    cycles = conn.execute(query("quality/supersession_cycles")).fetchall()
    open_ended = conn.execute(query("quality/superseded_without_valid_until")).fetchall()
    return [r[0] for r in cycles], [r[0] for r in open_ended]


def tombstone_leaks(conn: psycopg.Connection[Any]) -> dict[str, list[str]]:
    """Forgotten units whose text, or text derived from it, is still held somewhere, or could be stored again (their
    project unguarded): unit id -> the places (the unit, its inbox rows, a bundle, a vector, a weekly summary, a
    member pointer, a merged near-duplicate, an unguarded project)."""
    leaks: dict[str, list[str]] = {}
    for unit_id, place in conn.execute(query("quality/tombstones_with_text"),
                                       {"forget": V.AUDIT_FORGET, "feed": V.FEED_CONSOLIDATION}).fetchall():
        leaks.setdefault(unit_id, []).append(place)
    return leaks


def tombstones_with_text(conn: psycopg.Connection[Any]) -> list[str]:
    """Ids of forgotten units whose text, or text derived from it, is still held somewhere (see tombstone_leaks)."""
    return sorted(tombstone_leaks(conn))


def units_without_decay(conn: psycopg.Connection[Any], day: date) -> list[str]:
    """Units created and live at the day's end that have no decay score for the day."""
    rows = conn.execute(query("quality/units_without_decay"), {"day": day, "t": decay.day_end(day)}).fetchall()
    return [r[0] for r in rows]


def unlinked_consolidations(conn: psycopg.Connection[Any]) -> list[str]:
    """Consolidated units missing a source for a member, or with a member that does not point back."""
    rows = conn.execute(query("quality/unlinked_consolidations")).fetchall()
    return [r[0] for r in rows]


# --- Vectors --------------------------------------------------------------------------------

def serving_coverage(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """The serving model's coverage of active units, and whether it fell below EMBEDDINGS_MIN_COVERAGE."""
    model = embeddings.serving_model(conn)
    cov = embeddings.coverage(conn, model)
    return {"serving_model": model, **cov, "below_floor": cov["share"] < V.EMBEDDINGS_MIN_COVERAGE}


def embedding_dimensions(conn: psycopg.Connection[Any]) -> dict[str, list[int]]:
    """The distinct dimensions of each model's vectors, by model key."""
    return dict(conn.execute(query("quality/embedding_dimensions")).fetchall())


def wrong_dimensions(dimensions: dict[str, list[int]]) -> dict[str, list[int]]:
    """The models (of embedding_dimensions) that are unregistered or hold a vector off their registered dimension."""
    return {key: dims for key, dims in dimensions.items()
            if key not in V.EMBEDDING_MODELS or dims != [V.EMBEDDING_MODELS[key]["dim"]]}


def forgotten_units_with_vectors(conn: psycopg.Connection[Any]) -> list[str]:
    """Ids of forgotten units that still keep a vector in some model."""
    return [str(r[0]) for r in conn.execute(query("quality/forgotten_units_with_vectors")).fetchall()]


# --- Bundles --------------------------------------------------------------------------------

def bundle_problems(compiled: dict[str, Any]) -> list[str]:
    """Everything wrong with a bundle: schema, caps, unsanitised titles, secrets."""
    problems = []
    if set(compiled) - {"changed"} != {"v", "project", "revision", "units"} or compiled["v"] != V.BUNDLE_VERSION:
        problems.append("schema")
    units = compiled.get("units", [])
    if len(units) > V.BUNDLE_MAX_UNITS:
        problems.append("units cap")
    if len(json.dumps({k: v for k, v in compiled.items() if k != "changed"}).encode()) > V.BUNDLE_MAX_BYTES:
        problems.append("bytes cap")
    if units and sum(u["kind"] == "codemap" for u in units) > V.BUNDLE_MAX_CODEMAP_SHARE * len(units):
        problems.append("codemap share")
    if any(u["title"] != bundle.sanitize_title(u["title"]) for u in units):
        problems.append("unsanitised title")
    if any(gates.has_secret("\n".join([u["title"], *u["paths"], *u["keywords"]])) for u in units):
        problems.append("secret")
    return problems
