"""The memory database as a Dagster resource: DATABASE_URL when set, else the embedded server."""

from __future__ import annotations

import threading

import dagster as dg

import memory_assets
from memory_assets.api import Memory

_MEMORIES: dict[tuple, Memory] = {}
_LOCK = threading.Lock()


class PostgresResource(dg.ConfigurableResource):
    """PostgreSQL + pgvector holding the ledger; one pool per process, shared by every asset and check."""

    database_url: str | None = None
    home: str | None = None

    def memory(self) -> Memory:
        key = (self.database_url, self.home)
        with _LOCK:
            if key not in _MEMORIES:
                _MEMORIES[key] = memory_assets.connect(self.database_url, self.home)
            return _MEMORIES[key]
