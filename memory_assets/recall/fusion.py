"""Fusion and scoring as pure functions: legs fused, neighbours and sessions lifted, cues applied, then ranked."""

from __future__ import annotations

import heapq
import math
from datetime import datetime
from typing import Any

from memory_assets import tracing
from memory_assets import vocabulary as V
from memory_assets.recall import cues, learned

Fused = dict[str, dict[str, Any]]  # unit id -> its score components


def unfound() -> dict[str, Any]:
    """The components of a unit that neither leg found and that joins the pool through its neighbours or a round."""
    return {"dense": None, "sparse": None, "rrf": 0.0, "scores": 0.0, "relevance": 0.0}


@tracing.traced("memory.recall.fusion", tracing.candidates)
def fuse(dense: list[tuple[Any, ...]], sparse: list[tuple[Any, ...]], weights: tuple[float, float]) -> Fused:
    """Each leg's scores min-max normalised and weighted, mixed with weighted RRF; a unit first in both scores 1."""
    wd, ws = (weights[0] if dense else 0.0), (weights[1] if sparse else 0.0)
    if not wd + ws:
        return {}
    fused: Fused = {}
    for leg, rows, weight in (("dense", dense, wd), ("sparse", sparse, ws)):
        if not rows:
            continue
        scores = [1.0 - float(row[1]) for row in rows] if leg == "dense" else [float(row[1]) for row in rows]
        low, high = min(scores), max(scores)
        for rank, (row, score) in enumerate(zip(rows, scores, strict=True), start=1):
            rrf, normalised = weight / (V.RRF_K + rank), weight * ((score - low) / (high - low) if high > low else 1.0)
            entry = fused.get(row[0])
            if entry is None:  # a unit's first leg: its sums start there (0.0 + x is x)
                fused[row[0]] = {"dense": None, "sparse": None, leg: score, "rrf": rrf, "scores": normalised}
            else:
                entry[leg] = score
                entry["rrf"] += rrf
                entry["scores"] += normalised
    best_rrf, total, share = (wd + ws) / (V.RRF_K + 1), wd + ws, V.RRF_SHARE
    for entry in fused.values():
        rrf = entry["rrf"] = entry["rrf"] / best_rrf
        scores = entry["scores"] = entry["scores"] / total
        entry["relevance"] = share * rrf + (1 - share) * scores
    return fused


def seeds(fused: Fused, episodic: set[str]) -> list[str]:
    """The best-scoring episodic candidates, whose neighbouring turns share their relevance."""
    best = heapq.nsmallest(V.CONTEXT_SEEDS, fused, key=lambda u: -fused[u]["relevance"])  # sorted(...)[:n]
    return [u for u in best if u in episodic]


def of_seeds(neighbours: list[tuple[Any, ...]], seeds: list[str],
             details: dict[str, dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The (seed, neighbour, distance) rows of the seeds, among the turns next to every episodic candidate, whose
    turns share a session (any of their sources')."""
    chosen = {seed: set(details[seed]["sessions"] or ()) for seed in seeds}
    return [row for row in neighbours
            if row[0] in chosen and not chosen[row[0]].isdisjoint(details[row[1]]["sessions"] or ())]


def spread_to_neighbours(fused: Fused, neighbours: list[tuple[Any, ...]]) -> None:
    """Give each neighbouring turn a share of its best seed's relevance, falling with the distance in turns."""
    bonus: dict[str, float] = {}
    for of_id, unit_id, distance in neighbours:
        share = V.CONTEXT_WEIGHT * fused[of_id]["relevance"] / distance
        bonus[unit_id] = max(bonus.get(unit_id, 0.0), share)
    for unit_id, extra in bonus.items():
        entry = fused.get(unit_id) or fused.setdefault(unit_id, unfound())
        entry["context"] = extra
        entry["relevance"] += extra


def max_relevance(persona: bool, time: bool) -> float:
    """The highest relevance the structure and the cues in play can give: dividing by it brings relevance to 0..1."""
    return ((1 + V.CONTEXT_WEIGHT + V.SESSION_WEIGHT) * (1 + V.PERSONA_BOOST * persona)
            * (1 + V.TIME_CUE_BOOST * time))


def lift_sessions(fused: Fused, details: dict[str, dict[str, Any]]) -> None:
    """Give every unit a share of its session's best relevance: the evidence for a question clusters in sessions."""
    sessions = [(details[unit_id]["session_id"], entry) for unit_id, entry in fused.items()]
    best: dict[str, float] = {}
    for session, entry in sessions:
        if session and best.get(session, -1.0) < entry["relevance"]:  # max() without a call: relevance is >= 0
            best[session] = entry["relevance"]
    top = max(best.values(), default=0.0)
    if not top:
        return
    for session, entry in sessions:
        if session:
            lift = entry["session"] = V.SESSION_WEIGHT * best[session] / top
            entry["relevance"] += lift


@tracing.traced("memory.recall.score")
def score(fused: Fused, details: dict[str, dict[str, Any]], query: str, at: datetime) -> list[str]:
    """Final score: the learned ranker over every component when its weights file is usable, else the hand-set
    relevance (with the persona and time cues) * (0.7 + 0.2 importance + 0.1 recency); returns notes for the
    result (why a weights file present is not used)."""
    handset(fused, details, query, at)
    return learn(fused, details)


def learn(fused: Fused, details: dict[str, dict[str, Any]]) -> list[str]:
    """Replace the hand-set scores by the learned ranker's (one vectorised pass), capturing the candidates first
    when an evaluation asks; the hand-set scores stay when no usable weights file is there."""
    entries = list(fused.values())
    if learned.capture_on():
        learned.capture(list(fused), [details[u]["number"] for u in fused], entries)
    model, note = learned.active(entries)
    tracing.annotate(fusion="learned" if model is not None else "handset")
    if model is not None and entries:
        for entry, value in zip(entries, learned.scores(model, entries).tolist(), strict=True):
            entry["score"] = value
    return [note] if note else []


def handset(fused: Fused, details: dict[str, dict[str, Any]], query: str, at: datetime) -> None:
    """The hand-set score: relevance (with the persona and time cues) * (0.7 + 0.2 importance + 0.1 recency)."""
    named = cues.named_words(query)
    windows = cues.time_windows(query)
    pool = [(entry, details[unit_id]) for unit_id, entry in fused.items()]
    persona = dated = False
    if named or windows:  # most questions name no date, and few a persona: the cues' pass is one over the pool
        for entry, unit in pool:
            if named and unit["personas"] and not named.isdisjoint(unit["personas"]):
                entry["persona"] = V.PERSONA_BOOST
                entry["relevance"] *= 1 + V.PERSONA_BOOST
                persona = True
            if windows and any(start <= unit["valid_from"] < end for start, end in windows):
                entry["time"] = V.TIME_CUE_BOOST
                entry["relevance"] *= 1 + V.TIME_CUE_BOOST
                dated = True
    ceiling = max_relevance(persona, dated)
    for entry, unit in pool:
        relevance = entry["relevance"] = entry["relevance"] / ceiling
        importance = entry["importance"] = unit["importance"]  # real columns: floats already
        entry["trust"] = unit["trust"]
        fresh = entry["recency"] = recency(unit["valid_from"], at) if unit["recency"] is None else unit["recency"]
        entry["score"] = relevance * (0.7 + 0.2 * importance + 0.1 * fresh)


_DECAY_PER_SECOND = -math.log(2) / (V.RECENCY_HALF_LIFE_DAYS * 86400)  # recency's exponent, worked out once


def recency(valid_from: datetime, at: datetime) -> float:
    """Exponential recency of a unit's validity start, half-life RECENCY_HALF_LIFE_DAYS."""
    return math.exp(_DECAY_PER_SECOND * max(0.0, (at - valid_from).total_seconds()))


def ranked(fused: Fused, details: dict[str, dict[str, Any]], k: int) -> list[str]:
    """The k best unit ids by score, ties broken by unit number (older first)."""
    return heapq.nsmallest(k, fused, key=lambda u: (-fused[u]["score"], details[u]["number"]))  # sorted(...)[:k]
