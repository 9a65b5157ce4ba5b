"""The append-only audit log: who did what to which unit, with ids and reasons only (never text)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from memory_assets.database import query


def record(conn: psycopg.Connection[Any], actor: str, action: str, *, project: str | None = None,
           unit_id: object = None, reason: str | None = None, details: dict[str, Any] | None = None) -> None:
    """Append one audit row in the caller's transaction."""
    conn.execute(query("audit/record"), {"actor": actor, "action": action, "project": project, "unit_id": unit_id,
                                         "reason": reason, "details": Jsonb(details or {})})
