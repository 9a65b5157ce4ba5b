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
from memory_assets.recall import expansion, fusion
from memory_assets.recall import rerank as cross_encoder
from memory_assets.recall.legs import (
    candidates,
    candidates_while_encoding,
    cited_text,
    known_small,
    seedable,
    send_cited_text,
)
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
           weights: tuple[float, float] | None = None, prf: bool | None = None, second_round: bool | None = None,
           rerank: bool | None = None, reranker: cross_encoder.Reranker | None = None,
           serving_model: str | None = None) -> RecallResult:
    """Recall the units of a project that best answer a query, valid at `as_of` (default now), with citations.

    `prf`, `second_round` and `rerank` switch the query-side stages (None: the vocabulary's defaults, all off);
    `reranker` is the cross-encoder the rerank stage uses (None: the stage is skipped with a note);
    `serving_model` is the serving model when the caller read it already (request.opening), else read here.
    """
    validate_query(project, query, k, kinds, types, paths, as_of, legs)
    weights = weights or (V.DENSE_WEIGHT, V.SPARSE_WEIGHT)
    prf = V.RECALL_PRF if prf is None else prf
    second_round = V.RECALL_SECOND_ROUND if second_round is None else second_round
    rerank = V.RECALL_RERANK if rerank is None else rerank
    actor = actor or authz.Actor.reader(project)
    at = as_of or datetime.now(UTC)
    terms = tsquery_terms(query)
    tracing.annotate(project=project, k=k, legs=legs, terms=len(terms), historical=as_of is not None, prf=prf,
                     second_round=second_round, rerank=rerank)
    params = request_params(project, terms, k, at, as_of is not None, kinds, types, paths, reader=actor.name)
    notes: list[str] = []
    if rerank and reranker is None:
        notes.append(cross_encoder.missing_note())
    # a query not yet encoded, with full-text terms and the model loaded, is encoded while the server runs the
    # full-text leg (legs.candidates_while_encoding), and one whose vector is at hand asks those two statements too
    # in a project this connection last found small (legs.known_small); any other is encoded before the transaction
    # opens: a model that must load first never holds a connection in a transaction
    encoded_for, vector, full_text_first = None, None, False
    if legs in ("hybrid", "dense") and encoder is not None:
        encoded_for = serving_model or embeddings.serving_model(conn)
        vector = at_hand(encoder, encoded_for, query)
        full_text_first = legs == "hybrid" and bool(terms) and (
            warm(encoder, encoded_for) if vector is None else known_small(conn, project))
        if vector is None and not full_text_first:
            vector = encoded(encoder, encoded_for, query)
    # pipeline mode: after BEGIN, the role and scopes, the context and every candidate come back in one round trip
    # (a question encoded meanwhile: the full-text leg's answer arrives during the encode, the dense leg's after it),
    # and the hits' text with the COMMIT in a second; the query-side rounds run in the same scoped transaction, so
    # they see only what the first round may, and every statement reads one snapshot: the two legs' statements (a
    # question encoded between them) and the cited text agree on what a unit is (a unit forgotten meanwhile is
    # never a blank hit)
    with conn.pipeline():
        with authz.scoped(conn, actor, one_snapshot=True):
            sparse_leg = bool(terms) and legs in ("hybrid", "sparse")
            if full_text_first and encoder is not None and encoded_for is not None:
                known = vector  # at hand, or None: encoded beside the full-text leg
                found, vector = candidates_while_encoding(
                    conn, params, encoded_for, lambda: encoded(encoder, encoded_for, query) if known is None else known)
            else:
                found = candidates(conn, params, encoded_for or serving_model or V.DEFAULT_SERVING_MODEL, vector,
                                   sparse_leg)
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
            if not fused:
                return RecallResult(hits=[], mode=mode, notes=notes)
            near, episodic = found.near, seedable(found)
            if prf or second_round:
                first = fused.copy()
                best = structured(first, near, episodic, scoring, query, at, V.FEEDBACK_DOCS, feedback=True)
                extra = expansion.rounds(conn, params, query, found, best, vector, sparse_leg, weights, prf=prf,
                                         second_round=second_round)
                expansion.mix(fused, scoring, near, episodic, extra)
            wanted = max(k, V.RERANK_TOP_N) if rerank and reranker is not None else k
            top = structured(fused, near, episodic, scoring, query, at, wanted, notes)
            sent = send_cited_text(conn, top, actor.name)
        cited = cited_text(sent)  # after the COMMIT was queued: the two come back in one round trip
    if rerank and reranker is not None:  # outside the transaction: the model never holds a connection
        top = cross_encoder.rerank(reranker, query, top, cited, fused, k)
    return RecallResult(hits=[hit(cited[u], fused[u], u, mode) for u in top], mode=mode, notes=notes)


def at_hand(encoder: QueryEncoder, model_key: str, query: str) -> np.ndarray[Any, Any] | None:
    """The query's vector when the encoder has it without running the model (api.QueryVectors caches them)."""
    cached = getattr(encoder, "at_hand", None)
    return cached(model_key, query) if cached is not None else None


def warm(encoder: QueryEncoder, model_key: str) -> bool:
    """Whether the encoder says its model is loaded (a plain function never does: it is called before the
    transaction)."""
    loaded = getattr(encoder, "warm", None)
    return bool(loaded(model_key)) if loaded is not None else False


def encoded(encoder: QueryEncoder, model_key: str, query: str) -> np.ndarray[Any, Any] | None:
    """The query's vector from the encoder, traced."""
    with tracing.span("memory.recall.encode") as encoding:
        vector = encoder(model_key, query)
        tracing.record(encoding, model=model_key, vector=vector is not None)
    return vector


def structured(fused: fusion.Pool, near: list[tuple[Any, ...]], episodic: set[str],
               scoring: fusion.Details, query: str, at: datetime, k: int, notes: list[str] | None = None,
               *, feedback: bool = False) -> list[str]:
    """Conversation structure (neighbouring turns, sessions) and the cues applied to fused legs, then the k best;
    the feedback pass (the best hits the query-side rounds read) scores by hand, never captured for a fit."""
    if V.CONTEXT_WEIGHT > 0:
        seeds = fusion.seeds(fused, episodic)
        if seeds:
            fusion.spread_to_neighbours(fused, fusion.of_seeds(near, seeds, scoring))
    fusion.lift_sessions(fused, scoring)
    if feedback:
        fusion.handset(fused, scoring, query, at)
    else:
        said = fusion.score(fused, scoring, query, at)
        if notes is not None:
            notes.extend(said)
    return fusion.ranked(fused, scoring, k)


def hit(row: dict[str, Any], entry: dict[str, Any], unit_id: str, mode: str) -> Hit:
    """A hit from its cited row and its score components (rounded for display)."""
    return Hit(token=row["token"], title=row["title"], body=row["body"], kind=row["kind"], type=row["type"],
               score=round(entry["score"], 6),
               components={key: (round(value, 6) if isinstance(value, float) else value)
                           for key, value in entry.items() if key != "score"},
               citations=row["citations"] or [], valid_from=row["valid_from"], valid_until=row["valid_until"],
               status=row["status"], unit_id=unit_id, mode=mode)
