"""A recall request: its validation, the query's searchable terms, and the parameters every leg shares."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import psycopg

from memory_assets import embeddings, gates
from memory_assets import vocabulary as V
from memory_assets.database import one
from memory_assets.database import query as named_query
from memory_assets.errors import ValidationError

LEGS = ("hybrid", "dense", "sparse")


def opening(conn: psycopg.Connection[Any]) -> tuple[bool, str]:
    """Whether the kill switch is on and the model recall serves, read in one round trip before a request."""
    killed, serving_model = one(conn.execute(named_query("recall/opening"), embeddings.SERVING_MODEL_PARAMS,
                                             prepare=True))
    return bool(killed), str(serving_model)


def tsquery_terms(query: str) -> list[str]:
    """The query's searchable words, de-duplicated, at most RECALL_MAX_QUERY_TERMS."""
    words = [w.lower() for w in re.findall(r"[A-Za-z0-9]+", query)]
    terms = [w for w in dict.fromkeys(words) if w not in V.STOPWORDS and len(w) > 1]
    return terms[: V.RECALL_MAX_QUERY_TERMS]


def validate_query(project: str, query: str, k: int, kinds: Sequence[str] | None, types: Sequence[str] | None,
                   paths: Sequence[str] | None, as_of: datetime | None = None, legs: str = "hybrid",
                   reader: str | None = None) -> None:
    """Reject a request that names a bad project, query, k, filter, time or reader, naming the field and the limit,
    before any SQL sees it (a NUL byte or an out-of-range time would fail in the database instead)."""
    gates.project_name(project)
    if not isinstance(query, str) or not query.strip():
        raise ValidationError("query", "must not be empty")
    if len(query) > V.RECALL_MAX_QUERY_CHARS:
        raise ValidationError("query", f"at most {V.RECALL_MAX_QUERY_CHARS} characters (got {len(query)})")
    if not query.isprintable() and any(unicodedata.category(c) == "Cc" and c not in "\t\n\r" for c in query):
        raise ValidationError("query", "must not contain control characters")  # format characters are fine here
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= V.RECALL_MAX_K:
        raise ValidationError("k", f"must be between 1 and {V.RECALL_MAX_K} (got {gates.shown(k)})")
    for name, values, allowed in (("kinds", kinds, V.KINDS), ("types", types, V.TYPES)):
        if values is not None and (isinstance(values, str) or not isinstance(values, (list, tuple))):
            raise ValidationError(name, "must be a list of strings")
        if values is not None and len(values) > len(allowed):  # each at most once: a longer list repeats one
            raise ValidationError(name, f"at most {len(allowed)} items (got {len(values)})")
        for value in values or []:
            if not isinstance(value, str) or value not in allowed:
                raise ValidationError(name, f"must be among {', '.join(allowed)} (got {gates.shown(value)})")
    if paths is not None:
        if isinstance(paths, str) or not isinstance(paths, (list, tuple)):
            raise ValidationError("paths", "must be a list of strings")
        if len(paths) > V.PATHS_MAX:
            raise ValidationError("paths", f"at most {V.PATHS_MAX} items (got {len(paths)})")
        for i, path in enumerate(paths):
            gates.text_field(f"paths[{i}]", path, V.ITEM_MAX_CHARS)
    if as_of is not None:
        gates.bounded_time("as_of", as_of)
    gates.one_of("legs", legs, LEGS)
    if reader:
        gates.identifier("persona", reader)


def hnsw_candidates(k: int) -> int:
    """How many dense candidates the HNSW phase returns: few enough for one pass of ef_search, never fewer than k."""
    return max(V.HNSW_CANDIDATES, k)


class RequestContext(NamedTuple):
    """What a request reads first: the serving model, how many units the project has numbered, the ef_search set."""

    model_key: str
    units: int
    ef_search: int


def send_request_context(conn: psycopg.Connection[Any], project: str, k: int, *,
                         planned: bool) -> psycopg.Cursor[Any]:
    """Send the request's first read, which sets the HNSW knobs for the project's size, the plan mode (`planned`:
    the statement is the project's own, database.project_plan) and no parallel workers (in pipeline mode it waits
    for nothing: its row comes back with the next statement's)."""
    ef_floor = max(V.HNSW_EF_SEARCH, hnsw_candidates(k) * V.HNSW_OVERFETCH)
    return conn.execute(named_query("recall/request_context"), {
        **embeddings.SERVING_MODEL_PARAMS, "project": project, "ef_floor": ef_floor,
        "ef_max": max(ef_floor, V.HNSW_EF_SEARCH_MAX), "hnsw_min": V.HNSW_MIN_PROJECT_UNITS, "planned": planned},
        prepare=True)


def request_context(conn: psycopg.Connection[Any], project: str, k: int, *, planned: bool) -> RequestContext:
    """The serving model and the project's size in the request's first read, with the HNSW knobs set for its size."""
    row = one(send_request_context(conn, project, k, planned=planned))
    return RequestContext(str(row[0]), int(row[1]), int(row[2]))


def request_params(project: str, terms: list[str], k: int, at: datetime, historical: bool,
                   kinds: Sequence[str] | None = None, types: Sequence[str] | None = None,
                   paths: Sequence[str] | None = None, reader: str | None = None) -> dict[str, Any]:
    """The parameters every leg's SQL shares: the filters, k, the candidate count and the OR-ed query terms; the
    reader (the persona whose private units it sees) is validated here, where it enters the request's SQL."""
    if reader:
        gates.identifier("persona", reader)
    return {"project": project, "reader": reader, "at": at, "historical": historical,
            "kinds": list(kinds) if kinds else None, "types": list(types) if types else None,
            "paths": list(paths) if paths else None,
            "k": k, "candidates": max(V.RECALL_CANDIDATES, k), "tsquery": " | ".join(terms), "terms": terms}
