"""Learned fusion fitted and judged offline: every question's candidates as recall scored them, a linear ranker
fitted on some conversations and scored on the others (leave one conversation out), and the recall figures.

The ranker: a weight per feature (standardised), fitted by coordinate ascent on the mean of R@5, R@10 and R@25
(Metzler & Croft 2007, RankLib's "CA") starting from the hand-set score alone, a move kept only when it gains more
than FIT_MIN_GAIN. A pairwise logistic ranker (RankNet-style, random and hard negatives) was tried first: out of fold
it lost 0.01 dialog R@10 to the hand-set formula, which was tuned on these conversations for R@10, so the fit now
optimises recall itself. Its scale and bias are then set by a one-feature logistic fit of the labels on the ranker's
score (Platt), so the shipped score reads as a probability of being evidence.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression

from memory_assets.recall import learned

CATEGORY_NAMES = {1: "multi_hop", 2: "temporal", 3: "open_domain", 4: "single_hop"}
Array = np.ndarray[Any, Any]
FEATURES = learned.COMPONENTS  # what the ranker reads (expressions: name, name@max, a*b); chosen out of fold
FIT_STEPS = (-1.0, -0.5, -0.25, -0.1, -0.05, 0.05, 0.1, 0.25, 0.5, 1.0)  # moves of one standardised weight
FIT_MIN_GAIN = 0.0005  # a move must gain about one question in 2,000 (the fit's guard against noise)


@dataclass
class Asked:
    """One question's candidates as recall scored them: components, the hand-set score, unit numbers, sources."""

    units: str
    conversation: str
    category: int
    evidence: frozenset[str]
    components: tuple[str, ...]
    base: Array  # candidates x components
    handset: Array
    numbers: Array
    refs: list[frozenset[str]]
    ids: list[str]

    @property
    def labels(self) -> Array:
        """Which candidates cite evidence of the question."""
        return np.array([bool(r & self.evidence) for r in self.refs], dtype=bool)

    def aligned(self, components: Sequence[str]) -> Array:
        """The component matrix laid out as `components` (a component this question lacks is 0)."""
        column = {name: i for i, name in enumerate(self.components)}
        out = np.zeros((self.base.shape[0], len(components)), dtype=np.float64)
        for j, name in enumerate(components):
            if name in column:
                out[:, j] = self.base[:, column[name]]
        return out


def asked_from(captured: learned.Captured, units: str, conversation: str, category: int, evidence: frozenset[str],
               refs_of: dict[str, frozenset[str]]) -> Asked:
    """One captured scoring as an Asked question."""
    ids, numbers, entries = captured
    present = learned.numeric_components(entries)
    components = tuple(c for c in learned.COMPONENTS if c in present) + tuple(sorted(present - set(learned.COMPONENTS)))
    return Asked(units=units, conversation=conversation, category=category, evidence=evidence, components=components,
                 base=learned.matrix(entries, components),
                 handset=np.array([float(e["score"]) for e in entries], dtype=np.float64),
                 numbers=np.array(numbers, dtype=np.int64), refs=[refs_of.get(str(u), frozenset()) for u in ids],
                 ids=[str(u) for u in ids])


def components_of(asked: Sequence[Asked]) -> tuple[str, ...]:
    """Every component fusion knows and any other a question computed (new ones after), in fusion's order."""
    present = {c for a in asked for c in a.components} | set(learned.COMPONENTS)
    return tuple(c for c in learned.COMPONENTS if c in present) + tuple(sorted(present - set(learned.COMPONENTS)))


def ranking(scores: Array, numbers: Array) -> Array:
    """Candidate indices best first, ties broken by unit number (older first), as fusion.ranked orders them."""
    return np.lexsort((numbers, -scores))


def recall_at(a: Asked, scores: Array, ks: Sequence[int]) -> dict[int, float]:
    """The share of the question's evidence among the sources of the top k candidates, for each k."""
    order = ranking(scores, a.numbers)
    out: dict[int, float] = {}
    seen: set[str] = set()
    for rank, index in enumerate(order[: max(ks)].tolist(), start=1):
        seen |= a.refs[index]
        if rank in ks:
            out[rank] = len(seen & a.evidence) / len(a.evidence)
    for k in ks:
        out.setdefault(k, len(seen & a.evidence) / len(a.evidence))
    return out


def figures(asked: Sequence[Asked], scores: Sequence[Array], ks: Sequence[int]) -> dict[str, Any]:
    """R@k overall and per category, as `locomo.evaluate` reports them."""
    found = [(a.category, recall_at(a, s, ks)) for a, s in zip(asked, scores, strict=True)]

    def mean(c: int | None) -> dict[str, float]:
        return {str(k): round(statistics.fmean(f[k] for cat, f in found if c in (None, cat)), 4) for k in ks}

    return {"recall_at": mean(None), "questions": len(found),
            "per_category": {CATEGORY_NAMES[c]: mean(c) for c in sorted(CATEGORY_NAMES)
                             if any(cat == c for cat, _ in found)}}


def where(asked: Sequence[Asked], scores: Sequence[Array], ks: Sequence[int], units: str,
          conversation: str | None = None) -> dict[str, Any]:
    """The figures of the questions of one units (and one conversation)."""
    chosen = [(a, s) for a, s in zip(asked, scores, strict=True)
              if a.units == units and conversation in (None, a.conversation)]
    return figures([a for a, _ in chosen], [s for _, s in chosen], ks)


def model_scores(model: learned.FusionModel, asked: Sequence[Asked]) -> list[Array]:
    """Each question's candidates scored by a model exactly as recall scores them."""
    return [learned.score_matrix(model, a.aligned(model.components)) for a in asked]


@dataclass
class Packed:
    """Questions padded into one tensor, so one weight vector's recall is a few array operations."""

    x: Array  # questions x candidates x features (standardised)
    valid: Array  # questions x candidates: a real candidate
    masks: Array  # questions x candidates: the evidence items it cites, as bits
    size: Array  # questions: how many evidence items


def pack(asked: Sequence[Asked], components: Sequence[str], features: Sequence[str], scale: Array) -> Packed:
    """The questions' feature matrices (divided by `scale`), candidates' evidence bits and evidence counts."""
    width = max((a.base.shape[0] for a in asked), default=0)
    x = np.zeros((len(asked), width, len(features)))
    valid = np.zeros((len(asked), width), dtype=bool)
    masks = np.zeros((len(asked), width), dtype=np.int64)
    for q, a in enumerate(asked):
        n = a.base.shape[0]
        x[q, :n] = learned.design(a.aligned(components), components, features) / scale
        valid[q, :n] = True
        bit = {e: 1 << i for i, e in enumerate(sorted(a.evidence)[:62])}
        masks[q, :n] = [sum(bit.get(r, 0) for r in refs) for refs in a.refs]
    return Packed(x, valid, masks, np.array([min(len(a.evidence), 62) for a in asked]))


def objective(packed: Packed, w: Array, ks: Sequence[int] = (5, 10, 25)) -> float:
    """Mean recall at each of `ks` (averaged over them) of the weights' ranking (ties: candidate order)."""
    score = np.where(packed.valid, packed.x @ w, -np.inf)
    top = np.argsort(-score, axis=1, kind="stable")[:, : max(ks)]
    covered = np.bitwise_or.accumulate(np.take_along_axis(packed.masks, top, axis=1), axis=1)
    if not covered.size:
        return 0.0
    return float(np.mean([np.mean(np.bitwise_count(covered[:, min(k, covered.shape[1]) - 1]) / packed.size)
                          for k in ks]))


def ascend(packed: Packed, start: Array, rounds: int = 4) -> Array:
    """Coordinate ascent on the objective (Metzler & Croft 2007): each weight in turn moved by the step that raises
    recall most, by more than FIT_MIN_GAIN, until a round moves none."""
    w, best = start.copy(), objective(packed, start)
    for _ in range(rounds):
        moved = False
        for j in range(len(w)):
            trial = None
            for step in FIT_STEPS:
                candidate = w.copy()
                candidate[j] += step
                value = objective(packed, candidate)
                if value > best + FIT_MIN_GAIN:
                    best, trial = value, candidate
            if trial is not None:
                w, moved = trial, True
        if not moved:
            break
    return w


def fit(asked: Sequence[Asked], features: Sequence[str], components: Sequence[str] | None = None, *,
        meta: dict[str, Any] | None = None) -> learned.FusionModel:
    """A linear ranker fitted by coordinate ascent on recall, from the hand-set score, scaled by a Platt fit."""
    components = tuple(components or components_of(asked))
    seen = {c for a in asked for c in a.components}
    features = [f for f in features if all(p in seen for p in learned.parts(f))]  # a component never seen: no weight
    designs = [learned.design(a.aligned(components), components, features) for a in asked]
    stacked = np.vstack(designs)
    scale = stacked.std(axis=0)
    scale[scale == 0] = 1.0
    start = np.array([1.0 if f == learned.HANDSET else 0.0 for f in features])
    direction = ascend(pack(asked, components, features, scale), start) / scale
    raw = stacked @ direction
    labels = np.concatenate([a.labels for a in asked])
    platt = LogisticRegression(C=1.0, max_iter=1000).fit(raw.reshape(-1, 1), labels)
    slope, bias = float(platt.coef_[0][0]), float(platt.intercept_[0])
    if slope <= 0:  # a ranker the labels do not support: keep its order, unit scale
        slope, bias = 1.0, 0.0
    model = learned.FusionModel(components=components, features=tuple(features), weights=direction * slope,
                                bias=bias, meta=dict(meta or {}))
    learned.check(model)
    return model


def out_of_fold(asked: Sequence[Asked], features: Sequence[str], ks: Sequence[int]) -> dict[str, Any]:
    """Leave one conversation out: each conversation's questions ranked by a model fitted on the others' (all units
    of those conversations), with the figures per units and per conversation."""
    components = components_of(asked)
    conversations = sorted({a.conversation for a in asked})
    scored: list[Array | None] = [None] * len(asked)
    for held in conversations:
        model = fit([a for a in asked if a.conversation != held], features, components)
        for i, a in enumerate(asked):
            if a.conversation == held:
                scored[i] = learned.score_matrix(model, a.aligned(components))
    final = [s for s in scored if s is not None]
    return {"per_units": split(asked, final, ks),
            "per_conversation": {c: {u: where(asked, final, ks, u, c)["recall_at"]
                                     for u in sorted({a.units for a in asked if a.conversation == c})}
                                 for c in conversations}}


def split(asked: Sequence[Asked], scores: Sequence[Array], ks: Sequence[int]) -> dict[str, dict[str, Any]]:
    """Figures per units (dialog, observation) of scored questions."""
    return {u: where(asked, scores, ks, u) for u in sorted({a.units for a in asked})}
