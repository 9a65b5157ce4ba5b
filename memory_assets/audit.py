"""The append-only audit log: who did what to which unit, with ids and reasons only (never text)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from memory_assets import gates
from memory_assets.database import query
from memory_assets.errors import ValidationError


def record(conn: psycopg.Connection[Any], actor: str, action: str, *, project: str | None = None,
           unit_id: object = None, reason: str | None = None, details: dict[str, Any] | None = None) -> None:
    """Append one audit row in the caller's transaction; an actor or a reason that holds a credential is refused
    (ValidationError naming it, the caller's transaction undone), as the log keeps both for good."""
    for field_name, value in (("actor", actor), ("reason", reason)):
        if value is not None and gates.has_secret(value):
            raise ValidationError(field_name, "looks like a credential and is never stored")
    conn.execute(query("audit/record"), {"actor": actor, "action": action, "project": project, "unit_id": unit_id,
                                         "reason": reason, "details": Jsonb(details or {})})
