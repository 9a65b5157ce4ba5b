"""The public Python API agents call: one Memory object over a connection pool."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime
from typing import Iterator

import psycopg
from psycopg_pool import ConnectionPool

from memory_assets import curation, database, embeddings, gates, ledger
from memory_assets import vocabulary as V
from memory_assets.ledger import RememberResult


class Memory:
    """Long-term memory for agents: remember, look up and count units in one PostgreSQL ledger."""

    def __init__(self, pool: ConnectionPool, url: str):
        self.pool = pool
        self.url = url

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
    ) -> RememberResult:
        """Validate, gate, dedupe and store one unit; a ValidationError names the field and its limit."""
        candidate = gates.validate(
            project=project, kind=kind, type=type, title=title, body=body, paths=paths, keywords=keywords,
            confidence=confidence, importance=importance, feed=feed, task_id=task_id, session_id=session_id,
            persona=persona, model=model, observed_sha=observed_sha, source_ref=source_ref, valid_from=valid_from,
            source_text=source_text,
        )
        with self.connection() as conn:
            return ledger.remember(conn, candidate)

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
