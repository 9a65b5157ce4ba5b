"""Query-side rounds over the first round's best hits, for what one query misses: pseudo-relevance feedback (their
salient terms added to the sparse query, a Rocchio update of the query vector) and a second round seeded by their
entities, for multi-hop questions whose other evidence shares names rather than words with the question.

Every statement here runs in the request's scoped transaction (the caller's authz.scoped block), so a round sees
only what the actor may; each round's fused relevance becomes a named score component ("prf", "second_round").
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

import numpy as np
import psycopg
from psycopg.rows import dict_row

from memory_assets import tracing
from memory_assets import vocabulary as V
from memory_assets.database import query as named_query
from memory_assets.database import with_project_literal
from memory_assets.recall import cues, fusion
from memory_assets.recall.legs import Candidates, candidates, seedable

CAPITALISED = re.compile(r"\b[A-Z][a-z]{2,}\b")
OPENERS = ".!?:\n\"'("  # what ends the text before a word that opens a sentence or a turn ("Melanie: Wonderful")


class Round(NamedTuple):
    """One extra round: its score component, candidates, fused legs and its share of a unit's relevance."""

    component: str
    found: Candidates
    fused: fusion.Pool
    weight: float


class Feedback(NamedTuple):
    """What the first round's best hits offer a second round: text, visible personas, vectors, salient terms."""

    docs: list[dict[str, Any]]
    salient: list[str]


def feedback(conn: psycopg.Connection[Any], params: dict[str, Any], model_key: str, ids: list[str],
             units: int, *, planned: bool) -> Feedback:
    """The hits' text, personas and vectors, and their salient lexemes by (hits holding it) x IDF, best first; both
    statements in one round trip when the connection is in pipeline mode, the terms' planned as the request's
    candidates were (`planned`: the project's own statement, under the plan mode the request set for it)."""
    statement = {**params, "ids": ids, "model": model_key}
    with tracing.span("memory.recall.feedback") as span, conn.cursor(row_factory=dict_row) as docs_cursor:
        docs_cursor.execute(named_query("recall/feedback_docs"), statement, prepare=True)
        terms = named_query("recall/feedback_terms")
        terms_cursor = conn.execute(with_project_literal(terms, params["project"]) if planned else terms, statement,
                                    prepare=True)
        order = {unit_id: rank for rank, unit_id in enumerate(ids)}
        docs = sorted(docs_cursor.fetchall(), key=lambda d: order[d["unit_id"]])
        scored = [(hits * idf(df, units), lexeme) for lexeme, hits, df in terms_cursor.fetchall()]
        tracing.record(span, docs=len(docs), lexemes=len(scored))
    return Feedback(docs, [lexeme for _, lexeme in sorted(scored, key=lambda s: (-s[0], s[1]))])


def idf(df: int, units: int) -> float:
    """BM25's IDF, as the sparse leg counts it."""
    return math.log(1 + (max(units, 1) - df + 0.5) / (df + 0.5))


def rocchio(vector: Any, docs: list[dict[str, Any]]) -> Any:
    """The query vector moved towards the mean of the hits' vectors (beta PRF_ROCCHIO_BETA), back to unit length;
    the query's own vector when none of them has one."""
    vectors = [np.asarray(d["embedding"].to_numpy(), dtype=np.float32) for d in docs if d["embedding"] is not None]
    if vector is None or not vectors:
        return vector
    moved = np.asarray(vector, dtype=np.float32) + V.PRF_ROCCHIO_BETA * np.mean(vectors, axis=0)
    return (moved / np.linalg.norm(moved)).astype(np.float32)


def entities(docs: list[dict[str, Any]], query: str) -> list[str]:
    """The names the hits mention that the query does not: capitalised words inside sentences and the personas
    of their visible sources, a better-ranked hit counting more, in lower case."""
    named = cues.named_words(query)
    counts: dict[str, float] = {}
    for rank, doc in enumerate(docs, start=1):
        words = {m.group(0).lower() for m in CAPITALISED.finditer(doc["body"]) if inside_sentence(doc["body"], m)}
        words |= {p.lower() for p in doc["personas"] or () if re.fullmatch(r"[A-Za-z0-9]+", p)}
        for word in words - named - V.STOPWORDS:
            counts[word] = counts.get(word, 0.0) + 1 / rank
    return [word for word, _ in sorted(counts.items(), key=lambda c: (-c[1], c[0]))]


def inside_sentence(text: str, match: re.Match[str]) -> bool:
    """Whether a capitalised word stands inside a sentence (a name) rather than opening one (any word)."""
    before = text[: match.start()].rstrip(" ")
    return bool(before) and before[-1] not in OPENERS


def rounds(conn: psycopg.Connection[Any], params: dict[str, Any], query: str, found: Candidates, best: list[str],
           vector: Any, sparse: bool, weights: tuple[float, float], *, prf: bool,
           second_round: bool) -> list[Round]:
    """The extra rounds asked for, over the first round's best hits: each a full candidates statement (filters,
    neighbours and details as the first round's), fused like the first round."""
    if not best:
        return []
    fed = feedback(conn, params, found.model_key, best, found.units, planned=found.planned)
    done: list[Round] = []
    if prf:
        terms = list(dict.fromkeys(params["terms"] + fed.salient[: V.PRF_TERMS]))
        moved = rocchio(vector, fed.docs)
        more = candidates(conn, {**params, "terms": terms, "tsquery": " | ".join(terms)}, found.model_key, moved,
                          sparse and bool(terms))
        done.append(Round("prf", more, fusion.fuse(more.dense, more.sparse, weights), V.PRF_WEIGHT))
    if second_round and sparse:
        asked = set(params["terms"])
        seeds = [t for t in dict.fromkeys(entities(fed.docs, query) + fed.salient) if t not in asked]
        seeds = seeds[: V.SECOND_ROUND_TERMS]
        if seeds:
            more = candidates(conn, {**params, "terms": seeds, "tsquery": " | ".join(seeds)}, found.model_key, None,
                              True)
            done.append(Round("second_round", more, fusion.fuse([], more.sparse, weights), V.SECOND_ROUND_WEIGHT))
    return done


def mix(fused: fusion.Pool, details: fusion.Details, near: list[tuple[Any, ...]], episodic: set[str],
        extra: list[Round]) -> None:
    """Each unit's relevance becomes (1 - the rounds' weights) x its first-round relevance + each round's weight x
    its relevance there (0..1 stays 0..1); units a round found join the pool with their details and neighbours, and
    every unit carries each round's component (0 where the round missed it)."""
    if not extra:
        return
    fused.columns["relevance"] *= 1.0 - sum(r.weight for r in extra)
    for component, found, round_fused, weight in extra:
        theirs = round_fused.columns["relevance"]
        at = fused.join(round_fused.ids)
        fused.column(component)[at] = theirs  # created for every unit: those the round missed get 0 below
        fused.columns["relevance"][at] += weight * theirs
        details.extend(found.details)
        near.extend(found.near)
        episodic |= seedable(found)
    for component, *_ in extra:
        missed = fused.columns[component]
        missed[np.isnan(missed)] = 0.0
