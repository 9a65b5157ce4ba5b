"""The recall orchestrator: one scoped read that runs the legs, fuses and scores them, and cites the top k."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import psycopg

from memory_assets import authz, embeddings, tracing
from memory_assets import vocabulary as V
from memory_assets.recall import fusion
from memory_assets.recall.legs import candidates, cited_text
from memory_assets.recall.request import request_params, tsquery_terms, validate_query

QueryEncoder = Callable[[str, str], "np.ndarray[Any, Any] | None"]  # (model key, query) -> vector, None if unavailable


@dataclass
class Hit:
    """One recalled unit with its score, the score's components and the sources that back it."""

    token: str
    title: str
    body: str
    kind: str
    type: str
    score: float
    components: dict[str, Any]
    citations: list[dict[str, Any]]
    valid_from: datetime
    valid_until: datetime | None
    status: str
    unit_id: str
    mode: str

    def as_dict(self) -> dict[str, Any]:
        """The hit as plain data (CLI --json, MCP)."""
        return asdict(self)


@dataclass
class RecallResult:
    """The hits, best first, and which legs served them (hybrid | sparse_only | dense_only)."""

    hits: list[Hit]
    mode: str
    notes: list[str] = field(default_factory=list)

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, index: int) -> Hit:
        return self.hits[index]


@tracing.traced("memory.recall", tracing.fields("mode", "hits", "notes"))
def recall(conn: psycopg.Connection[Any], project: str, query: str, k: int = V.RECALL_DEFAULT_K, *,
           as_of: datetime | None = None, kinds: Sequence[str] | None = None, types: Sequence[str] | None = None,
           paths: Sequence[str] | None = None, actor: authz.Actor | None = None,
           encoder: QueryEncoder | None = None, legs: str = "hybrid",
           weights: tuple[float, float] | None = None) -> RecallResult:
    """Recall the units of a project that best answer a query, valid at `as_of` (default now), with citations."""
    validate_query(project, query, k, kinds, types, paths, as_of, legs)
    weights = weights or (V.DENSE_WEIGHT, V.SPARSE_WEIGHT)
    actor = actor or authz.Actor.reader(project)
    at = as_of or datetime.now(UTC)
    terms = tsquery_terms(query)
    tracing.annotate(project=project, k=k, legs=legs, terms=len(terms), historical=as_of is not None)
    params = request_params(project, terms, k, at, as_of is not None, kinds, types, paths, reader=actor.name)
    notes: list[str] = []
    # the query is encoded before the transaction opens: a slow model never holds a connection in a transaction
    encoded_for, vector = None, None
    if legs in ("hybrid", "dense") and encoder is not None:
        with tracing.span("memory.recall.encode") as encoding:
            encoded_for = embeddings.serving_model(conn)
            vector = encoder(encoded_for, query)
            tracing.record(encoding, model=encoded_for, vector=vector is not None)
    # pipeline mode: after BEGIN, the role and scopes, the context and every candidate come back in one round trip
    with conn.pipeline(), authz.scoped(conn, actor):
        found = candidates(conn, params, encoded_for or V.DEFAULT_SERVING_MODEL,
                           vector, bool(terms) and legs in ("hybrid", "sparse"))
        if vector is not None and found.model_key != encoded_for:  # the serving model switched in between
            vector = None
            notes.append(f"the serving model changed to {found.model_key} during the request")
        elif vector is None and legs != "sparse":
            notes.append("no query vector: the embedding model is unavailable")
        elif vector is not None and not found.dense:
            notes.append(f"no vectors of the serving model {found.model_key} match")
        dense, sparse, scoring = found.dense, found.sparse, found.details
        mode = "hybrid" if dense and terms else ("dense_only" if dense else "sparse_only")
        fused = fusion.fuse(dense, sparse, weights)
        if fused and V.CONTEXT_WEIGHT > 0:
            seeds = fusion.seeds(fused, {row[0] for row in dense + sparse if row[2]})
            if seeds:
                fusion.spread_to_neighbours(fused, fusion.of_seeds(found.near, seeds, scoring))
        if not fused:
            return RecallResult(hits=[], mode=mode, notes=notes)
        fusion.lift_sessions(fused, scoring)
        fusion.score(fused, scoring, query, at)
        top = fusion.ranked(fused, scoring, k)
        cited = cited_text(conn, top, actor.name)
    return RecallResult(hits=[hit(cited[u], fused[u], u, mode) for u in top], mode=mode, notes=notes)


def hit(row: dict[str, Any], entry: dict[str, Any], unit_id: str, mode: str) -> Hit:
    """A hit from its cited row and its score components (rounded for display)."""
    return Hit(token=row["token"], title=row["title"], body=row["body"], kind=row["kind"], type=row["type"],
               score=round(entry["score"], 6),
               components={key: (round(value, 6) if isinstance(value, float) else value)
                           for key, value in entry.items() if key != "score"},
               citations=row["citations"] or [], valid_from=row["valid_from"], valid_until=row["valid_until"],
               status=row["status"], unit_id=unit_id, mode=mode)
