"""The public Python API agents call: one Memory object over a connection pool."""

from __future__ import annotations

import functools
import logging
from contextlib import contextmanager
from datetime import datetime
from typing import Iterator

import numpy as np
import psycopg
from psycopg_pool import ConnectionPool

from memory_assets import authz, bundle, curation, database, embeddings, events, gates, ledger, lifecycle, recall
from memory_assets import vocabulary as V
from memory_assets.ledger import RememberResult
from memory_assets.recall import RecallResult

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=V.QUERY_VECTOR_CACHE_SIZE)
def _query_vector(model_key: str, normalised_query: str) -> np.ndarray:
    vector = embeddings.embedder_for(model_key).encode([normalised_query])[0]
    vector.setflags(write=False)
    return vector


def encode_query(model_key: str, query: str) -> np.ndarray | None:
    """The query's vector under a model (bounded cache by model and normalised query); None when unavailable."""
    try:
        return _query_vector(model_key, gates.normalise(query))
    except Exception as error:  # degrade to sparse recall, never fail
        log.warning("query encoder unavailable model=%s reason=%s", model_key, type(error).__name__)
        return None


class Memory:
    """Long-term memory for agents: remember, look up and count units in one PostgreSQL ledger."""

    def __init__(self, pool: ConnectionPool, url: str, encoder: recall.QueryEncoder | None = encode_query):
        self.pool = pool
        self.url = url
        self.encoder = encoder

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        with self.pool.connection() as conn:
            yield conn

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc) -> None:
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
            return ledger.remember(conn, candidate, supersedes=supersedes)

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

    def confirm(self, project: str, token: str, task_id: str, actor: str = "api") -> dict:
        """One confirmation per (unit, task): trust rises."""
        with self.connection() as conn:
            return lifecycle.vote(conn, project, token, task_id, 1, actor)

    def flag(self, project: str, token: str, task_id: str, actor: str = "api") -> dict:
        """One flag per (unit, task): trust falls; past the threshold the unit is flagged and leaves recall."""
        with self.connection() as conn:
            return lifecycle.vote(conn, project, token, task_id, -1, actor)

    def history(self, project: str, token: str) -> list[dict]:
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
                units = [{"id": h.token, "kind": h.kind, "title": h.title, "body": h.body} for h in hits]
            else:
                compiled = bundle.latest_bundle(conn, project) or bundle.compile_bundle(conn, project)
                units = bundle.prompt_units(conn, project, [u["id"] for u in compiled["units"][: V.PROMPT_MAX_UNITS]])
            block, tokens = bundle.render_prompt_block(units)
            if task_id and tokens:
                events.record_events(conn, project, task_id, [{"token": t, "kind": "injected", "channel": "prompt"}
                                                              for t in tokens])
            return block

    def record_events(self, project: str, task_id: str, items: list[dict]) -> int:
        """Record injected/read/cited/followed events; one row per (task, unit, kind) under any concurrency."""
        with self.connection() as conn:
            return events.record_events(conn, project, task_id, items)

    def cite_from_text(self, project: str, task_id: str, text: str) -> list[str]:
        """Record `cited` events for the mem-<n> tokens of this project found in an agent's output."""
        with self.connection() as conn:
            return events.cite_from_text(conn, project, task_id, text)

    def effective_memory(self, task_id: str, epic_id: str | None = None) -> dict:
        """Whether memory is on for a task (task → epic → default; kill switch; holdout), recorded per task."""
        with self.connection() as conn:
            return events.effective_memory(conn, task_id, epic_id)

    def set_switch(self, scope: str, key: str, value: str) -> None:
        with self.connection() as conn:
            events.set_switch(conn, scope, key, value)

    def compile_bundle(self, project: str) -> dict:
        with self.connection() as conn:
            return bundle.compile_bundle(conn, project)

    def unit(self, project: str, token: str) -> dict | None:
        """The unit `mem-<n>` of a project with its sources, or None."""
        with self.connection() as conn:
            return ledger.unit(conn, project, token)

    def stats(self, project: str | None = None) -> dict:
        """Units by status and kind, rejections by reason."""
        with self.connection() as conn:
            return ledger.stats(conn, project)

    def correct(self, project: str, token: str, *, title: str | None = None, body: str | None = None,
                keywords: list[str] | None = None, actor: str = "api") -> int:
        """Fix a unit's wording in place; returns the new revision (its old vectors stop being served at once)."""
        with self.connection() as conn:
            return ledger.correct(conn, project, token, title=title, body=body, keywords=keywords, actor=actor)

    def review_queue(self, project: str | None = None) -> list[dict]:
        """Units waiting in review, with the unit each conflicts with."""
        with self.connection() as conn:
            return curation.review_queue(conn, project)

    def decide(self, project: str, token: str, decision: str, target: str | None = None,
               actor: str = "reviewer") -> dict:
        """Approve, reject or supersede (target = the replaced unit's token) a unit in review; audited."""
        with self.connection() as conn:
            return curation.decide(conn, project, token, decision, target, actor=actor)

    def serving_model(self) -> str:
        with self.connection() as conn:
            return embeddings.serving_model(conn)

    def set_serving_model(self, model_key: str, actor: str = "operator") -> None:
        """Switch the model recall serves; vectors of other models stay until dropped."""
        with self.connection() as conn:
            embeddings.set_serving_model(conn, model_key, actor)

    def register_canon(self, project: str, path: str, text: str) -> int:
        """Register a canon document so candidates that merely restate it are rejected."""
        with self.connection() as conn:
            return ledger.register_canon(conn, project, path, text)


def connect(database_url: str | None = None, home: str | None = None, pool_size: int = V.POOL_MAX_SIZE) -> Memory:
    """Open memory on DATABASE_URL (or the argument), else on the embedded server under MEMORY_ASSETS_HOME."""
    url = database.database_url(database_url, home)
    database.migrate(url)
    return Memory(database.open_pool(url, max_size=pool_size), url)
