"""The recall legs and follow-ups as SQL: dense (exact or HNSW), sparse (IDF), neighbouring turns, details, text."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from memory_assets import embeddings
from memory_assets import vocabulary as V
from memory_assets.database import query
from memory_assets.recall.request import hnsw_candidates

Row = tuple[Any, ...]  # (unit_id, score or distance, episodic)


def dense_leg(conn: psycopg.Connection[Any], params: dict[str, Any], model_key: str, project_units: int) -> list[Row]:
    """Cosine search over the serving model's current vectors, every filter applied before the final LIMIT.

    Exact for projects under HNSW_MIN_PROJECT_UNITS; above, the HNSW first phase for HNSW_CANDIDATES (or k) rows,
    falling back to exact when its over-fetch leaves fewer than that (bench/recall.py measures both paths).
    """
    exact = query("recall/dense_exact")
    if project_units < V.HNSW_MIN_PROJECT_UNITS:
        return conn.execute(exact, params).fetchall()
    wanted = {**params, "candidates": hnsw_candidates(params["k"])}
    overfetch = wanted["candidates"] * V.HNSW_OVERFETCH
    spec = embeddings.model_spec(model_key)
    approximate = sql.SQL(query("recall/dense_hnsw")).format(dim=sql.SQL(str(int(spec.dim))),
                                                             model=sql.Literal(model_key))
    rows = conn.execute(approximate, {**wanted, "overfetch": overfetch}).fetchall()
    return rows if len(rows) >= wanted["candidates"] else conn.execute(exact, wanted).fetchall()


def sparse_leg(conn: psycopg.Connection[Any], params: dict[str, Any], terms: list[str], units: int) -> list[Row]:
    """Full-text candidates scored by the summed IDF of the query terms each one contains.

    `units` is the project's numbered-unit count (memory_projects.last_number): the N of the IDF, read for free.
    """
    return conn.execute(query("recall/sparse"), {**params, "terms": terms, "units": float(max(units, 1))}).fetchall()


def neighbours(conn: psycopg.Connection[Any], params: dict[str, Any], seeds: list[str]) -> list[Row]:
    """(seed, neighbour, distance) for the recallable episodic turns next to each seed in the same session."""
    return conn.execute(query("recall/neighbours"), {**params, "ids": seeds, "window": V.CONTEXT_WINDOW}).fetchall()


def details(conn: psycopg.Connection[Any], ids: list[str], historical: bool, reader: str) -> dict[str, dict[str, Any]]:
    """What scoring reads of each candidate (number, importance, trust, validity, visible personas and session)."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(query("recall/details"), {"ids": ids, "historical": historical, "reader": reader})
        return {r["unit_id"]: r for r in rows.fetchall()}


def cited_text(conn: psycopg.Connection[Any], ids: list[str], reader: str) -> dict[str, dict[str, Any]]:
    """The hits' text, validity and the citations their reader may see."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(query("recall/cited_text"), {"ids": ids, "reader": reader})
        return {r["unit_id"]: r for r in rows.fetchall()}
