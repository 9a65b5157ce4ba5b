"""The memory database as a Dagster resource: DATABASE_URL when set, else the embedded server."""

from __future__ import annotations

import threading

import dagster as dg

from memory_assets.api import Memory, connect

_MEMORIES: dict[tuple[str | None, str | None], Memory] = {}
_LOCK = threading.Lock()


class PostgresResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """PostgreSQL + pgvector holding the ledger; one pool per process, shared by every asset and check."""

    database_url: str | None = None
    home: str | None = None

    def memory(self) -> Memory:
        key = (self.database_url, self.home)
        with _LOCK:
            if key not in _MEMORIES:
                _MEMORIES[key] = connect(self.database_url, self.home)
            return _MEMORIES[key]
