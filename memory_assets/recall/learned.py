"""Learned fusion: recall's final score as a fitted linear ranker over the score components, read from a versioned
weights file, so the weights come from labelled questions (cross-validated by conversation) instead of by hand.

The file (memory_assets/recall/fusion_weights.json, written by `memory-assets eval fit-fusion`) holds:
`format` (FUSION_WEIGHTS_FORMAT), `components` (every numeric component the fit saw: a request that computes one
outside them, e.g. a new leg, falls back until refitted), `features` (expressions over components: `name`, `name@max`
= divided by the request's largest value of it, `a*b` = a product), `weights` and `bias` of the logistic score
`sigmoid(bias + weights . features)`, and the provenance (data, command, fit date, in-sample and out-of-fold
figures). Absent, unreadable or mismatched, recall uses the hand-set formula and says why in a note.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memory_assets import vocabulary as V

log = logging.getLogger(__name__)

HANDSET = "handset"  # the hand-set formula's score, computed first: a feature like any component
COMPONENTS = ("dense", "sparse", "rrf", "scores", "relevance", "context", "session", "persona", "time",
              "importance", "trust", "recency", HANDSET)  # what fusion computes today; one added later counts
KNOWN = frozenset(COMPONENTS)
NOT_FEATURES = frozenset({"score"})  # the output itself
PACKAGED = Path(__file__).with_name(V.FUSION_WEIGHTS_FILE)
Matrix = "np.ndarray[Any, np.dtype[np.float64]]"


@dataclass(frozen=True)
class FusionModel:
    """A fitted linear ranker: feature expressions over components, their weights and the logistic bias."""

    components: tuple[str, ...]
    features: tuple[str, ...]
    weights: np.ndarray[Any, np.dtype[np.float64]]
    bias: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The model as the weights file stores it (provenance first)."""
        return {"format": V.FUSION_WEIGHTS_FORMAT, **self.meta, "components": list(self.components),
                "features": list(self.features), "weights": [float(w) for w in self.weights], "bias": self.bias}


def numeric_components(entries: Sequence[dict[str, Any]]) -> set[str]:
    """The numeric components the entries carry (a None leg value counts: the leg is a component, just absent);
    the known ones by name, any other by its values (one pass over the keys, then only over a new key's values)."""
    keys: set[str] = set().union(*entries) if entries else set()
    return present(key for key in keys if key in KNOWN or all(
        entry.get(key) is None or isinstance(entry.get(key), (int, float)) for entry in entries))


def present(names: Iterable[str]) -> set[str]:
    """The components numeric values under these names give the ranker: the hand-set score as HANDSET, never the
    output itself."""
    names = set(names)
    return ({HANDSET} if "score" in names else set()) | (names - NOT_FEATURES)


def parts(feature: str) -> list[str]:
    """The component names one feature expression reads."""
    return [name.removesuffix("@max") for name in feature.split("*")]


def check(model: FusionModel) -> None:
    """Refuse a model whose features read components it does not list, or whose weights do not match them."""
    unknown = {name for feature in model.features for name in parts(feature)} - set(model.components)
    if unknown:
        raise ValueError(f"features read unlisted components: {', '.join(sorted(unknown))}")
    if (model.weights.ndim != 1 or len(model.weights) != len(model.features)
            or not np.all(np.isfinite(model.weights))):
        raise ValueError("one finite weight per feature expected")
    if not np.isfinite(model.bias):
        raise ValueError("the bias is not finite")


def from_dict(data: dict[str, Any]) -> FusionModel:
    """A model from the file's JSON; ValueError when it is of another format or malformed."""
    if not isinstance(data, dict) or data.get("format") != V.FUSION_WEIGHTS_FORMAT:
        raise ValueError(f"format {data.get('format') if isinstance(data, dict) else None!r} is not "
                         f"{V.FUSION_WEIGHTS_FORMAT}")
    try:
        model = FusionModel(components=tuple(str(c) for c in data["components"]),
                            features=tuple(str(f) for f in data["features"]),
                            weights=np.asarray(data["weights"], dtype=np.float64), bias=float(data["bias"]),
                            meta={k: v for k, v in data.items()
                                  if k not in ("format", "components", "features", "weights", "bias")})
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"malformed ({type(error).__name__}: {error})") from error
    check(model)
    return model


def write(model: FusionModel, path: Path) -> None:
    """Write the weights file (sorted, indented: a reviewable diff)."""
    check(model)
    Path(path).write_text(json.dumps(model.as_dict(), indent=2) + "\n")


def weights_path() -> Path | None:
    """The weights file recall reads: FUSION_WEIGHTS_ENV when set ("off": none), else the packaged one."""
    chosen = os.environ.get(V.FUSION_WEIGHTS_ENV, "").strip()
    if chosen.lower() in ("off", "none", "handset"):
        return None
    return Path(chosen) if chosen else PACKAGED


_loaded: dict[tuple[str, int, int], tuple[FusionModel | None, str | None]] = {}


def load(path: Path | None) -> tuple[FusionModel | None, str | None]:
    """The model in a weights file, or None with the reason when it is unusable (None, None: no file at all);
    read once per (path, mtime, size), so recall pays one stat per request."""
    if path is None:
        return None, None
    try:
        stat = path.stat()
    except OSError:
        return None, None
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _loaded:
        try:
            loaded: tuple[FusionModel | None, str | None] = (from_dict(json.loads(path.read_text())), None)
        except (OSError, ValueError) as error:  # JSONDecodeError is a ValueError
            note = f"learned fusion off: the weights file {path.name} is unusable ({str(error)[:160]})"
            log.warning("%s", note)
            loaded = (None, note)
        _loaded.clear()
        _loaded[key] = loaded
    return _loaded[key]


# evaluation hooks: a model used instead of the file (None: the hand-set formula), and a capture of every request's
# candidates with their components, so folds are fitted and scored offline on exactly what recall computes
_override: contextvars.ContextVar[tuple[FusionModel | None] | None] = contextvars.ContextVar("fusion_model",
                                                                                             default=None)
Captured = tuple[list[str], list[int], list[dict[str, Any]]]  # unit ids, unit numbers, components (hand-set score)
_capture: contextvars.ContextVar[list[Captured] | None] = contextvars.ContextVar("fusion_capture", default=None)


@contextlib.contextmanager
def using(model: FusionModel | None) -> Iterator[None]:
    """Within the block, recall in this context ranks with `model` (None: the hand-set formula), not the file."""
    token = _override.set((model,))
    try:
        yield
    finally:
        _override.reset(token)


@contextlib.contextmanager
def capturing() -> Iterator[list[Captured]]:
    """Within the block, every scoring in this context appends its candidates (ids, numbers, components) here."""
    captured: list[Captured] = []
    token = _capture.set(captured)
    try:
        yield captured
    finally:
        _capture.reset(token)


def capture_on() -> bool:
    """Whether an evaluation captures this context's scorings (recall gathers what capture needs only then)."""
    return _capture.get() is not None


def capture(ids: list[str], numbers: list[int], entries: list[dict[str, Any]]) -> None:
    """Record one scoring's candidates when a capture is on (a copy, whatever the caller does with them after)."""
    captured = _capture.get()
    if captured is not None:
        captured.append((ids, numbers, [dict(entry) for entry in entries]))


def active(components: set[str]) -> tuple[FusionModel | None, str | None]:
    """The model this request ranks with (None: the hand-set formula) and, when a file exists but is not used,
    why: it must list every numeric component the request's candidates carry (`components`, as `present` names
    them; read only when a file is there)."""
    override = _override.get()
    if override is not None:
        return override[0], None
    model, note = load(weights_path())
    if model is None:
        return None, note
    if not components <= set(model.components):
        missing = ", ".join(sorted(components - set(model.components)))
        return None, f"learned fusion off: the weights file was fitted without {missing}; refit it"
    return model, note


def matrix(entries: Sequence[dict[str, Any]], components: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float64]]:
    """The entries' components as a (candidates x components) matrix: absent or None is 0, a bool 0/1 (an
    evaluation's captured candidates; recall's own pool gives column_matrix)."""
    out = np.zeros((len(entries), len(components)), dtype=np.float64)
    for j, name in enumerate(components):
        key = "score" if name == HANDSET else name
        out[:, j] = [entry.get(key) or 0.0 for entry in entries]
    return out


def design(base: np.ndarray[Any, np.dtype[np.float64]], components: Sequence[str],
           features: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float64]]:
    """The feature expressions evaluated over one request's component matrix (`@max`: over its candidates)."""
    column = {name: i for i, name in enumerate(components)}
    out = np.ones((base.shape[0], len(features)), dtype=np.float64)
    for j, feature in enumerate(features):
        for name in feature.split("*"):
            values = base[:, column[name.removesuffix("@max")]]
            if name.endswith("@max"):
                top = float(np.max(values)) if values.size else 0.0
                values = values / top if top > 0 else np.zeros_like(values)
            out[:, j] *= values
    return out


def column_matrix(columns: Mapping[str, np.ndarray[Any, np.dtype[np.float64]]], components: Sequence[str],
                  rows: int) -> np.ndarray[Any, np.dtype[np.float64]]:
    """A pool's component columns (recall.fusion.Pool) as the matrix `matrix` builds from entries: absent is 0."""
    absent = np.zeros(rows)
    return np.column_stack([np.nan_to_num(columns.get("score" if name == HANDSET else name, absent))
                            for name in components])


def score_matrix(model: FusionModel, base: np.ndarray[Any, np.dtype[np.float64]]
                 ) -> np.ndarray[Any, np.dtype[np.float64]]:
    """The model's score of each row of a component matrix laid out as `model.components`."""
    logits = design(base, model.components, model.features) @ model.weights + model.bias
    return 1.0 / (1.0 + np.exp(-np.clip(logits, -500.0, 500.0)))
