"""The public Python API agents call: one Memory object over a connection pool."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime
from typing import Any, Self

import numpy as np
import psycopg
from psycopg_pool import ConnectionPool

from memory_assets import authz, bundle, curation, database, embeddings, events, gates, lifecycle, recall
from memory_assets import vocabulary as V
from memory_assets.ledger import canon, capture, units
from memory_assets.ledger.capture import RememberResult
from memory_assets.recall import RecallResult

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=V.QUERY_VECTOR_CACHE_SIZE)
def _query_vector(model_key: str, normalised_query: str) -> np.ndarray[Any, Any]:
    """The read-only vector of an already normalised query, cached so a repeated question skips the model."""
    vector: np.ndarray[Any, Any] = embeddings.embedder_for(model_key).encode([normalised_query])[0]
    vector.setflags(write=False)
    return vector


def encode_query(model_key: str, query: str) -> np.ndarray[Any, Any] | None:
    """The query's vector under a model (bounded cache by model and normalised query); None when unavailable."""
    try:
        return _query_vector(model_key, gates.normalise(query))
    except Exception as error:  # degrade to sparse recall, never fail
        log.warning("query encoder unavailable model=%s reason=%s", model_key, type(error).__name__)
        return None


class Memory:
    """Long-term memory for agents: remember, look up and count units in one PostgreSQL ledger."""

    def __init__(self, pool: ConnectionPool[Any], url: str,
                 encoder: recall.QueryEncoder | None = encode_query) -> None:
        """Memory over an open pool; `encoder` turns queries into vectors (None: full-text recall only)."""
        self.pool = pool
        self.url = url
        self.encoder = encoder

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection for one unit of work, returned to the pool afterwards."""
        with self.pool.connection() as conn:
            yield conn

    def close(self) -> None:
        """Close the pool, so a short-lived process leaves no connections behind."""
        self.pool.close()

    def __enter__(self) -> Self:
        """Use memory in a with block that closes the pool at the end."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the pool when the with block ends, error or not."""
        self.close()

    def remember(
        self,
        project: str,
        kind: str,
        type: str,
        title: str,
        body: str,
        paths: list[str] | None = None,
        keywords: list[str] | None = None,
        confidence: float = V.DEFAULT_CONFIDENCE,
        importance: float = V.DEFAULT_IMPORTANCE,
        feed: str = "api",
        task_id: str | None = None,
        session_id: str | None = None,
        persona: str | None = None,
        model: str | None = None,
        observed_sha: str | None = None,
        source_text: str | None = None,
        source_ref: str | None = None,
        valid_from: datetime | None = None,
        supersedes: str | None = None,
        visibility: str = V.DEFAULT_VISIBILITY,
    ) -> RememberResult:
        """Validate, gate, dedupe and store one unit; a ValidationError names the field and its limit."""
        candidate = gates.validate(
            project=project, kind=kind, type=type, title=title, body=body, paths=paths, keywords=keywords,
            confidence=confidence, importance=importance, feed=feed, task_id=task_id, session_id=session_id,
            persona=persona, model=model, observed_sha=observed_sha, source_ref=source_ref, valid_from=valid_from,
            visibility=visibility, source_text=source_text,
        )
        with self.connection() as conn:
            return capture.remember(conn, candidate, supersedes=supersedes)

    def remember_many(self, candidates: list[gates.Candidate], *, fold_now: bool = True) -> dict[str, Any]:
        """Bulk write path (imports, evaluations): every candidate gated, the rest captured and (by default) folded."""
        with self.connection() as conn:
            return capture.remember_many(conn, candidates, fold_now=fold_now)

    def recall(self, project: str, query: str, k: int = V.RECALL_DEFAULT_K, as_of: datetime | None = None,
               kinds: list[str] | None = None, types: list[str] | None = None, paths: list[str] | None = None,
               actor: authz.Actor | None = None, legs: str = "hybrid") -> RecallResult:
        """Hybrid recall of active units valid at `as_of` (default now), with score components and citations."""
        with self.connection() as conn:
            return recall.recall(conn, project, query, k, as_of=as_of, kinds=kinds, types=types, paths=paths,
                                 actor=actor, encoder=self.encoder, legs=legs)

    def forget(self, project: str, token: str, actor: authz.Actor, reason: str | None = None) -> str:
        """Tombstone a unit everywhere for good (needs the forget scope); returns its id."""
        with self.connection() as conn:
            return lifecycle.forget(conn, project, token, actor, reason)

    def confirm(self, project: str, token: str, task_id: str, actor: str = "api") -> dict[str, Any]:
        """One confirmation per (unit, task): trust rises."""
        with self.connection() as conn:
            return lifecycle.vote(conn, project, token, task_id, 1, actor)

    def flag(self, project: str, token: str, task_id: str, actor: str = "api") -> dict[str, Any]:
        """One flag per (unit, task): trust falls; past the threshold the unit is flagged and leaves recall."""
        with self.connection() as conn:
            return lifecycle.vote(conn, project, token, task_id, -1, actor)

    def history(self, project: str, token: str) -> list[dict[str, Any]]:
        """The supersession chain through a unit, oldest first."""
        with self.connection() as conn:
            return lifecycle.history(conn, project, token)

    def prompt_block(self, project: str, query: str | None = None, task_id: str | None = None,
                     epic_id: str | None = None) -> str:
        """A <memories> block of ≤ 8 units (recalled for the query, else the bundle's best) marked as untrusted
        data; rendering records `injected` events. Empty, and nothing recorded, when memory is off for the task."""
        with self.connection() as conn:
            if task_id and events.effective_memory(conn, task_id, epic_id)["value"] == "off":
                return ""
            if query:
                hits = recall.recall(conn, project, query, V.PROMPT_MAX_UNITS, types=list(V.INJECTABLE_TYPES),
                                     encoder=self.encoder)
                shown = [{"id": h.token, "kind": h.kind, "title": h.title, "body": h.body} for h in hits]
            else:
                compiled = bundle.latest_bundle(conn, project) or bundle.compile_bundle(conn, project)
                shown = bundle.prompt_units(conn, project, [u["id"] for u in compiled["units"][: V.PROMPT_MAX_UNITS]])
            block, tokens = bundle.render_prompt_block(shown)
            if task_id and tokens:
                events.record_events(conn, project, task_id, [{"token": t, "kind": "injected", "channel": "prompt"}
                                                              for t in tokens])
            return block

    def record_events(self, project: str, task_id: str, items: list[dict[str, Any]]) -> int:
        """Record injected/read/cited/followed events; one row per (task, unit, kind) under any concurrency."""
        with self.connection() as conn:
            return events.record_events(conn, project, task_id, items)

    def cite_from_text(self, project: str, task_id: str, text: str) -> list[str]:
        """Record `cited` events for the mem-<n> tokens of this project found in an agent's output."""
        with self.connection() as conn:
            return events.cite_from_text(conn, project, task_id, text)

    def effective_memory(self, task_id: str, epic_id: str | None = None) -> dict[str, Any]:
        """Whether memory is on for a task (task → epic → default; kill switch; holdout), recorded per task."""
        with self.connection() as conn:
            return events.effective_memory(conn, task_id, epic_id)

    def set_switch(self, scope: str, key: str, value: str) -> None:
        """Turn memory on or off for a scope (global kill switch, epic or task), so a rollout can be undone."""
        with self.connection() as conn:
            events.set_switch(conn, scope, key, value)

    def compile_bundle(self, project: str) -> dict[str, Any]:
        """Compile a project's bundle now instead of waiting for its asset to materialise."""
        with self.connection() as conn:
            return bundle.compile_bundle(conn, project)

    def unit(self, project: str, token: str) -> dict[str, Any] | None:
        """The unit `mem-<n>` of a project with its sources, or None."""
        with self.connection() as conn:
            return units.unit(conn, project, token)

    def stats(self, project: str | None = None) -> dict[str, Any]:
        """Units by status and kind, rejections by reason."""
        with self.connection() as conn:
            return units.stats(conn, project)

    def correct(self, project: str, token: str, *, title: str | None = None, body: str | None = None,
                keywords: list[str] | None = None, actor: str = "api") -> int:
        """Fix a unit's wording in place; returns the new revision (its old vectors stop being served at once)."""
        with self.connection() as conn:
            return capture.correct(conn, project, token, title=title, body=body, keywords=keywords, actor=actor)

    def review_queue(self, project: str | None = None) -> list[dict[str, Any]]:
        """Units waiting in review, with the unit each conflicts with."""
        with self.connection() as conn:
            return curation.review_queue(conn, project)

    def decide(self, project: str, token: str, decision: str, target: str | None = None,
               actor: str = "reviewer") -> dict[str, Any]:
        """Approve, reject or supersede (target = the replaced unit's token) a unit in review; audited."""
        with self.connection() as conn:
            return curation.decide(conn, project, token, decision, target, actor=actor)

    def serving_model(self) -> str:
        """The model key recall serves, as every worker reads it from the database."""
        with self.connection() as conn:
            return embeddings.serving_model(conn)

    def embedding_model(self, model_key: str | None = None) -> str:
        """The registered model key to embed with: the one asked for (checked), else the serving model."""
        if model_key is None:
            return self.serving_model()
        return embeddings.model_spec(model_key).key

    def embed_changes(self, model_key: str, progress: Callable[[int], None] | None = None) -> dict[str, int]:
        """Embed the units changed since this model's journal cursor (resumable); progress gets each page's size."""
        embedder = embeddings.embedder_for(model_key)
        with self.connection() as conn:
            return embeddings.embed_changes(conn, embedder, progress=progress)

    def days_with_units(self) -> list[date]:
        """UTC creation days that hold embeddable units: the partitions an embedding backfill covers."""
        with self.connection() as conn:
            return embeddings.days_with_units(conn)

    def embedding_coverage(self, model_key: str) -> dict[str, Any]:
        """How many active units have a vector of the model at their current revision."""
        with self.connection() as conn:
            return embeddings.coverage(conn, model_key)

    def set_serving_model(self, model_key: str, actor: str = "operator") -> None:
        """Switch the model recall serves; vectors of other models stay until dropped."""
        with self.connection() as conn:
            embeddings.set_serving_model(conn, model_key, actor)

    def register_canon(self, project: str, path: str, text: str) -> int:
        """Register a canon document so candidates that merely restate it are rejected."""
        with self.connection() as conn:
            return canon.register_canon(conn, project, path, text)


def connect(database_url: str | None = None, home: str | None = None, pool_size: int = V.POOL_MAX_SIZE) -> Memory:
    """Open memory on DATABASE_URL (or the argument), else on the embedded server under MEMORY_ASSETS_HOME."""
    url = database.database_url(database_url, home)
    database.migrate(url)
    return Memory(database.open_pool(url, max_size=pool_size), url)
