"""A recall request: its validation, the query's searchable terms, and the parameters every leg shares."""

from __future__ import annotations

import re
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


def tsquery_terms(query: str) -> list[str]:
    """The query's searchable words, de-duplicated, at most RECALL_MAX_QUERY_TERMS."""
    words = [w.lower() for w in re.findall(r"[A-Za-z0-9]+", query)]
    terms = [w for w in dict.fromkeys(words) if w not in V.STOPWORDS and len(w) > 1]
    return terms[: V.RECALL_MAX_QUERY_TERMS]


def validate_query(project: str, query: str, k: int, kinds: Sequence[str] | None, types: Sequence[str] | None,
                   paths: Sequence[str] | None, as_of: datetime | None = None, legs: str = "hybrid") -> None:
    """Reject a request that names a bad project, query, k, filter or time, naming the field and the limit."""
    gates.project_name(project)
    if not isinstance(query, str) or not query.strip():
        raise ValidationError("query", "must not be empty")
    if len(query) > V.RECALL_MAX_QUERY_CHARS:
        raise ValidationError("query", f"at most {V.RECALL_MAX_QUERY_CHARS} characters (got {len(query)})")
    if not isinstance(k, int) or not 1 <= k <= V.RECALL_MAX_K:
        raise ValidationError("k", f"must be between 1 and {V.RECALL_MAX_K} (got {k!r})")
    for name, values, allowed in (("kinds", kinds, V.KINDS), ("types", types, V.TYPES)):
        for value in values or []:
            if value not in allowed:
                raise ValidationError(name, f"must be among {', '.join(allowed)} (got {value!r})")
    if paths is not None and (isinstance(paths, str) or not all(isinstance(p, str) for p in paths)):
        raise ValidationError("paths", "must be a list of strings")
    if as_of is not None and as_of.tzinfo is None:
        raise ValidationError("as_of", "must be timezone-aware")
    if legs not in LEGS:
        raise ValidationError("legs", f"must be one of {', '.join(LEGS)} (got {legs!r})")


def hnsw_candidates(k: int) -> int:
    """How many dense candidates the HNSW phase returns: few enough for one pass of ef_search, never fewer than k."""
    return max(V.HNSW_CANDIDATES, k)


class RequestContext(NamedTuple):
    """What a request reads first: the serving model, how many units the project has numbered, the ef_search set."""

    model_key: str
    units: int
    ef_search: int


def request_context(conn: psycopg.Connection[Any], project: str, k: int) -> RequestContext:
    """The serving model and the project's size in the request's first read, with the HNSW knobs set for its size."""
    ef_floor = max(V.HNSW_EF_SEARCH, hnsw_candidates(k) * V.HNSW_OVERFETCH)
    row = one(conn.execute(named_query("recall/request_context"), {
        **embeddings.SERVING_MODEL_PARAMS, "project": project, "ef_floor": ef_floor,
        "ef_max": max(ef_floor, V.HNSW_EF_SEARCH_MAX)}))
    return RequestContext(str(row[0]), int(row[1]), int(row[2]))


def request_params(project: str, terms: list[str], k: int, at: datetime, historical: bool,
                   kinds: Sequence[str] | None = None, types: Sequence[str] | None = None,
                   paths: Sequence[str] | None = None, reader: str | None = None) -> dict[str, Any]:
    """The parameters every leg's SQL shares: the filters, k, the candidate count and the OR-ed query terms."""
    return {"project": project, "reader": reader, "at": at, "historical": historical,
            "kinds": list(kinds) if kinds else None, "types": list(types) if types else None,
            "paths": list(paths) if paths else None,
            "k": k, "candidates": max(V.RECALL_CANDIDATES, k), "tsquery": " | ".join(terms)}
