"""Fusion and scoring as pure functions over the pool's columns: legs fused, neighbours and sessions lifted, cues
applied, then ranked."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from memory_assets import tracing
from memory_assets import vocabulary as V
from memory_assets.recall import cues, learned

LEGS = ("dense", "sparse")  # a leg that did not find a unit: None among its components, not left out
UNFOUND_ZERO = ("rrf", "scores", "relevance")  # a unit neither leg found starts at 0 in these, lacks the rest


class Positioned(Mapping[str, dict[str, Any]]):
    """Units at positions, in the order they joined (`ids`, `at`: unit id -> position), read as unit id -> its
    fields."""

    ids: list[str]
    at: dict[str, int]

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, unit_id: object) -> bool:
        return unit_id in self.at

    def positions(self, unit_ids: Sequence[str]) -> np.ndarray[Any, np.dtype[np.intp]]:
        """The positions of units here, in their order (a unit not here is a KeyError)."""
        return np.fromiter(map(self.at.__getitem__, unit_ids), np.intp, len(unit_ids))


class Pool(Positioned):
    """Every candidate's score components as columns, a position per unit in the order it joined (NaN: the unit
    lacks that component), so fusion and scoring are array operations; read as unit id -> its components."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.at: dict[str, int] = {}
        self.columns: dict[str, np.ndarray[Any, np.dtype[np.float64]]] = {}

    @classmethod
    def of(cls, entries: Mapping[str, Mapping[str, Any]]) -> Pool:
        """A pool from components per unit (a component a unit lacks, or None, is absent)."""
        pool = cls()
        pool.join(entries)
        for entry in entries.values():
            for name in entry:
                pool.column(name)
        for name, column in pool.columns.items():
            column[:] = [np.nan if entry.get(name) is None else entry[name] for entry in entries.values()]
        return pool

    def __getitem__(self, unit_id: str) -> dict[str, Any]:
        at = self.at[unit_id]
        entry: dict[str, Any] = {}
        for name, column in self.columns.items():
            value = float(column[at])
            if not math.isnan(value):
                entry[name] = value
            elif name in LEGS:
                entry[name] = None
        return entry

    def copy(self) -> Pool:
        """A pool that later scoring does not change."""
        pool = Pool()
        pool.ids, pool.at = list(self.ids), dict(self.at)
        pool.columns = {name: column.copy() for name, column in self.columns.items()}
        return pool

    def join(self, unit_ids: Iterable[str]) -> np.ndarray[Any, np.dtype[np.intp]]:
        """The units' positions; a unit new to the pool joins it as one neither leg found."""
        at, before = self.at, len(self.ids)
        join = at.setdefault
        found = np.fromiter([join(unit_id, len(at)) for unit_id in unit_ids], np.intp)
        if len(at) > before:  # the dict keeps the order units joined in
            self.ids.extend(itertools.islice(at, before, None))
            for name, column in self.columns.items():
                self.columns[name] = np.concatenate(
                    (column, np.full(len(at) - before, 0.0 if name in UNFOUND_ZERO else np.nan)))
        return found

    def column(self, name: str) -> np.ndarray[Any, np.dtype[np.float64]]:
        """A component's column, every unit lacking it when it is new."""
        column = self.columns.get(name)
        if column is None:
            column = self.columns[name] = np.full(len(self.ids), np.nan)
        return column


class Details(Positioned):
    """What scoring reads of every candidate as columns, a position per unit, built from the statement's columns
    without a dict per unit (NumPy where numeric; recency NaN where a unit has no decay score); read as unit id -> its
    details. A unit's one persona and one session come as texts, its lists only where it has more (legs.unpack)."""

    NUMERIC = ("number", "importance", "trust", "recency", "valid_from_us")  # NumPy columns
    LISTS = ("episodic", "personas", "persona", "session_id", "sessions", "version")  # a Python value per unit
    FIELDS = NUMERIC + LISTS

    def __init__(self, ids: Sequence[str], columns: Mapping[str, Sequence[Any]]) -> None:
        self.ids: list[str] = list(ids)
        self.at: dict[str, int] = dict(zip(self.ids, range(len(self.ids)), strict=True))
        self.number = np.fromiter(columns["number"], np.int64, len(self.ids))
        self.importance = np.fromiter(columns["importance"], np.float64, len(self.ids))
        self.trust = np.fromiter(columns["trust"], np.float64, len(self.ids))
        self.recency = np.fromiter((np.nan if r is None else r for r in columns["recency"]), np.float64,
                                   len(self.ids))
        self.valid_from_us = np.fromiter(columns["valid_from_us"], np.int64, len(self.ids))  # micros(valid_from)
        self.episodic: list[bool] = list(columns["episodic"])
        self.personas: list[list[str] | None] = list(columns["personas"])
        self.persona: list[str | None] = list(columns["persona"])
        self.session_id: list[str | None] = list(columns["session_id"])
        self.sessions: list[list[str] | None] = list(columns["sessions"])
        self.version: list[tuple[Any, Any]] = list(columns["version"])

    @classmethod
    def of(cls, entries: Mapping[str, Mapping[str, Any]]) -> Details:
        """Details from fields per unit, as __getitem__ reads them (a field left out is None, NaN where numeric,
        episodic False, valid_from the epoch; number given)."""
        defaults = {"episodic": False, "importance": np.nan, "trust": np.nan}
        columns = {name: [entry.get(name, defaults.get(name)) for entry in entries.values()] for name in cls.FIELDS}
        columns["valid_from_us"] = [micros(entry.get("valid_from", EPOCH)) for entry in entries.values()]
        return cls(list(entries), columns)

    def __getitem__(self, unit_id: str) -> dict[str, Any]:
        at = self.at[unit_id]
        recency = float(self.recency[at])
        return {"number": int(self.number[at]), "importance": float(self.importance[at]),
                "trust": float(self.trust[at]),
                "valid_from": EPOCH + timedelta(microseconds=int(self.valid_from_us[at])),
                "personas": self.personas_of(at), "session_id": self.session_id[at],
                "recency": None if math.isnan(recency) else recency, "sessions": self.sessions_of(at) or None,
                "episodic": self.episodic[at], "version": self.version[at]}

    @functools.cached_property
    def turns(self) -> dict[int, str]:
        """The episodic units by number, worked out once for both legs' neighbouring turns (legs.neighbours)."""
        return dict(itertools.compress(zip(self.number.tolist(), self.ids, strict=True), self.episodic))

    def personas_of(self, at: int) -> list[str] | None:
        """The personas of the unit at a position that its reader may see (None: none)."""
        personas, persona = self.personas[at], self.persona[at]
        return personas if personas is not None or persona is None else [persona]

    def sessions_of(self, at: int) -> Sequence[str]:
        """The sessions of the unit at a position that its reader may see."""
        sessions, session_id = self.sessions[at], self.session_id[at]
        return sessions if sessions is not None else (() if session_id is None else [session_id])

    def joined(self, other: Details) -> Details:
        """These details and the units of `other` not here, leaving both as they are (a unit both hold is as here)."""
        both = Details(self.ids, {name: getattr(self, name) for name in self.FIELDS})
        both.extend(other)
        return both

    def extend(self, other: Details) -> None:
        """Take in the units of `other` that are not here yet (a unit both hold stays as it is here)."""
        new = [at for at, unit_id in enumerate(other.ids) if unit_id not in self.at]
        if not new:
            return
        self.__dict__.pop("turns", None)  # worked out again from the units now here
        for at in new:
            self.at[other.ids[at]] = len(self.ids)
            self.ids.append(other.ids[at])
        for name in self.NUMERIC:
            setattr(self, name, np.concatenate((getattr(self, name), getattr(other, name)[new])))
        for name in self.LISTS:
            theirs = getattr(other, name)
            getattr(self, name).extend(theirs[at] for at in new)


@tracing.traced("memory.recall.fusion", tracing.candidates)
def fuse(dense: list[tuple[Any, ...]], sparse: list[tuple[Any, ...]], weights: tuple[float, float]) -> Pool:
    """Each leg's scores min-max normalised and weighted, mixed with weighted RRF; a unit first in both scores 1."""
    pool = Pool()
    for name in (*LEGS, *UNFOUND_ZERO):
        pool.column(name)
    wd, ws = (weights[0] if dense else 0.0), (weights[1] if sparse else 0.0)
    if not wd + ws:
        return pool
    legs = []
    for leg, rows, weight in (("dense", dense, wd), ("sparse", sparse, ws)):
        if rows:
            raw = np.fromiter((row[1] for row in rows), np.float64, len(rows))
            legs.append((leg, pool.join(row[0] for row in rows), 1.0 - raw if leg == "dense" else raw, weight))
    # every unit joined at 0 (UNFOUND_ZERO); a leg holds a unit once, and a NaN distance (a zero query vector) is
    # every one of its leg's: that leg then normalises to 1 as before, its value read back as None
    rrf, scores = pool.columns["rrf"], pool.columns["scores"]
    for leg, at, score, weight in legs:
        pool.columns[leg][at] = score
        low, high = score.min(), score.max()
        rrf[at] += weight / (V.RRF_K + np.arange(1, len(at) + 1))
        scores[at] += weight * ((score - low) / (high - low)) if high > low else weight * 1.0
    rrf /= (wd + ws) / (V.RRF_K + 1)
    scores /= wd + ws
    pool.columns["relevance"] = V.RRF_SHARE * rrf + (1 - V.RRF_SHARE) * scores
    return pool


def seeds(fused: Pool, episodic: set[str]) -> list[str]:
    """The best-scoring episodic candidates, whose neighbouring turns share their relevance."""
    best = np.argsort(-fused.columns["relevance"], kind="stable")[: V.CONTEXT_SEEDS]
    return [unit_id for unit_id in map(fused.ids.__getitem__, best.tolist()) if unit_id in episodic]


def of_seeds(neighbours: list[tuple[Any, ...]], seeds: list[str], details: Details) -> list[tuple[Any, ...]]:
    """The (seed, neighbour, distance) rows of the seeds, among the turns next to every episodic candidate, whose
    turns share a session (any of their sources')."""
    at, sessions_of = details.at, details.sessions_of
    chosen = {seed: set(sessions_of(at[seed])) for seed in seeds}
    return [row for row in neighbours
            if row[0] in chosen and not chosen[row[0]].isdisjoint(sessions_of(at[row[1]]))]


def spread_to_neighbours(fused: Pool, neighbours: list[tuple[Any, ...]]) -> None:
    """Give each neighbouring turn a share of its best seed's relevance, falling with the distance in turns."""
    relevance, at = fused.columns["relevance"], fused.at
    bonus: dict[str, float] = {}
    for of_id, unit_id, distance in neighbours:
        share = V.CONTEXT_WEIGHT * float(relevance[at[of_id]]) / distance
        bonus[unit_id] = max(bonus.get(unit_id, 0.0), share)
    if bonus:
        lifted, extra = fused.join(bonus), np.fromiter(bonus.values(), np.float64, len(bonus))
        fused.column("context")[lifted] = extra
        fused.columns["relevance"][lifted] += extra


def max_relevance(persona: bool, time: bool) -> float:
    """The highest relevance the structure and the cues in play can give: dividing by it brings relevance to 0..1."""
    return ((1 + V.CONTEXT_WEIGHT + V.SESSION_WEIGHT) * (1 + V.PERSONA_BOOST * persona)
            * (1 + V.TIME_CUE_BOOST * time))


def lift_sessions(fused: Pool, details: Details) -> None:
    """Give every unit a share of its session's best relevance: the evidence for a question clusters in sessions."""
    numbered: dict[str, int] = {}
    session_id = details.session_id
    session = np.fromiter((-1 if not s else numbered.setdefault(s, len(numbered))
                           for s in map(session_id.__getitem__, details.positions(fused.ids).tolist())), np.intp,
                          len(fused))
    if not numbered:
        return
    held, relevance = session >= 0, fused.columns["relevance"]
    best = np.full(len(numbered), -1.0)
    np.maximum.at(best, session[held], relevance[held])
    top = best.max()
    if not top:
        return
    lift = V.SESSION_WEIGHT * best[session[held]] / top
    fused.column("session")[held] = lift
    relevance[held] += lift


@tracing.traced("memory.recall.score")
def score(fused: Pool, details: Details, query: str, at: datetime) -> list[str]:
    """Final score: the learned ranker over every component when its weights file is usable, else the hand-set
    relevance (with the persona and time cues) * (0.7 + 0.2 importance + 0.1 recency); returns notes for the
    result (why a weights file present is not used)."""
    handset(fused, details, query, at)
    return learn(fused, details)


def learn(fused: Pool, details: Details) -> list[str]:
    """Replace the hand-set scores by the learned ranker's (one vectorised pass), capturing the candidates first
    when an evaluation asks; the hand-set scores stay when no usable weights file is there."""
    if learned.capture_on():
        learned.capture(list(fused), details.number[details.positions(fused.ids)].tolist(), list(fused.values()))
    model, note = learned.active(learned.present(fused.columns))
    tracing.annotate(fusion="learned" if model is not None else "handset")
    if model is not None and len(fused):
        fused.columns["score"] = learned.score_matrix(
            model, learned.column_matrix(fused.columns, model.components, len(fused)))
    return [note] if note else []


def handset(fused: Pool, details: Details, query: str, at: datetime) -> None:
    """The hand-set score: relevance (with the persona and time cues) * (0.7 + 0.2 importance + 0.1 recency)."""
    named, windows = cues.named_words(query), cues.time_windows(query)
    where = details.positions(fused.ids)
    units = where.tolist()
    relevance, persona, dated = fused.columns["relevance"], False, False
    if named:
        personas_of = details.personas_of
        marked = np.fromiter((not named.isdisjoint(personas_of(u) or ()) for u in units), bool, len(units))
        if persona := bool(marked.any()):
            fused.column("persona")[marked] = V.PERSONA_BOOST
            relevance[marked] *= 1 + V.PERSONA_BOOST
    valid_from = details.valid_from_us[where]
    if windows:
        marked = np.zeros(len(units), bool)
        for start, end in windows:
            marked = marked | ((micros(start) <= valid_from) & (valid_from < micros(end)))
        if dated := bool(marked.any()):
            fused.column("time")[marked] = V.TIME_CUE_BOOST
            relevance[marked] *= 1 + V.TIME_CUE_BOOST
    relevance /= max_relevance(persona, dated)
    importance = fused.columns["importance"] = details.importance[where]
    fused.columns["trust"] = details.trust[where]
    fresh = fused.columns["recency"] = details.recency[where]
    unscored, now = np.isnan(fresh), micros(at)  # recency() unit by unit: the microseconds apart as Python ints,
    # divided as timedelta.total_seconds() divides them (past 2**53 us a float64 would round twice)
    fresh[unscored] = [math.exp(_DECAY_PER_SECOND * max(0.0, (now - start) / 1_000_000))
                       for start in valid_from[unscored].tolist()]
    fused.columns["score"] = relevance * (0.7 + 0.2 * importance + 0.1 * fresh)


EPOCH = datetime(2000, 1, 1, tzinfo=UTC)  # PostgreSQL's: a timestamptz is int64 microseconds from it
_DECAY_PER_SECOND = -math.log(2) / (V.RECENCY_HALF_LIFE_DAYS * 86400)  # recency's exponent, worked out once


def micros(moment: datetime) -> int:
    """A time as PostgreSQL's binary timestamptz holds it, whole microseconds since EPOCH: how recall reads a unit's
    validity start (database.execute_positional's times_as_micros)."""
    return (moment - EPOCH) // timedelta(microseconds=1)


def recency(valid_from: datetime, at: datetime) -> float:
    """Exponential recency of a unit's validity start, half-life RECENCY_HALF_LIFE_DAYS."""
    return math.exp(_DECAY_PER_SECOND * max(0.0, (at - valid_from).total_seconds()))


def ranked(fused: Pool, details: Details, k: int) -> list[str]:
    """The k best unit ids by score, ties broken by unit number (older first)."""
    numbers = details.number[details.positions(fused.ids)]
    return [fused.ids[at] for at in np.lexsort((numbers, -fused.columns["score"]))[:k].tolist()]
