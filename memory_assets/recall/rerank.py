"""The optional rerank stage: a cross-encoder (sentence-transformers' CrossEncoder, loaded from a local folder)
re-scores the top fused candidates against the query, which bi-encoder vectors and term matches score apart.

No wheel ships cross-encoder weights and nothing is downloaded: without a folder at RERANKER_PATH_ENV the stage is
skipped and the recall result says so.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory_assets import tracing
from memory_assets import vocabulary as V
from memory_assets.recall import fusion

log = logging.getLogger(__name__)

Reranker = Callable[[str, list[str]], list[float]]  # (query, texts) -> one score per text, higher is better

_LOCK = threading.Lock()


@functools.cache
def _load(path: str) -> Reranker:
    """A CrossEncoder from a local folder (once per process), its scores through the model's activation (a
    sigmoid for one label: 0..1)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(path, device="cpu")
    lock = threading.Lock()  # one predict at a time per model: torch's threads are the parallelism

    def score(query: str, texts: list[str]) -> list[float]:
        if not texts:
            return []
        with lock:
            scores = model.predict([(query, text) for text in texts], show_progress_bar=False)
        return [float(s) for s in scores]

    return score


def configured(path: str | os.PathLike[str] | None = None) -> Reranker | None:
    """The cross-encoder at `path` (default: the folder RERANKER_PATH_ENV names); None where there is none or it
    does not load."""
    folder = path or os.environ.get(V.RERANKER_PATH_ENV)
    if not folder or not (Path(folder) / "config.json").is_file():
        return None
    with _LOCK:
        try:
            return _load(str(Path(folder).resolve()))
        except Exception as error:  # weights that do not load: recall degrades to the fused ranking with a note
            log.warning("reranker unavailable reason=%s", type(error).__name__)
            return None


def missing_note() -> str:
    """What a recall that asked for reranking says when no weights are installed."""
    return f"rerank skipped: no cross-encoder weights (set {V.RERANKER_PATH_ENV} to a local CrossEncoder folder)"


@tracing.traced("memory.recall.rerank")
def rerank(reranker: Reranker, query: str, ids: list[str], texts: dict[str, dict[str, Any]], fused: fusion.Pool,
           k: int) -> list[str]:
    """The k best of `ids` once the cross-encoder has scored each (title and body) against the query: its score is
    the "rerank" component and RERANK_SHARE of the final score (ties keep the fused order)."""
    scores = reranker(query, [f"{texts[u]['title']}\n{texts[u]['body']}" for u in ids])
    if len(scores) != len(ids):  # a scorer's short answer would otherwise spread over every hit
        raise ValueError(f"the reranker returned {len(scores)} scores for {len(ids)} texts")
    at = fused.positions(ids)  # the pool's own units
    score = fused.columns["score"]
    fused.column("fused_score")[at] = score[at]
    reranked = fused.column("rerank")
    reranked[at] = scores
    score[at] = V.RERANK_SHARE * reranked[at] + (1 - V.RERANK_SHARE) * score[at]
    order = {unit_id: rank for rank, unit_id in enumerate(ids)}
    return sorted(ids, key=lambda u: (-score[fused.at[u]], order[u]))[:k]
