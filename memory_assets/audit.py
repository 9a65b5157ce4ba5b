"""The append-only audit log: who did what to which unit, with ids and reasons only (never text)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from memory_assets import gates
from memory_assets import vocabulary as V
from memory_assets.database import query
from memory_assets.errors import ValidationError


def kept(field_name: str, value: str | None) -> str | None:
    """An actor or a reason as the log may keep it for good: a string within AUDIT_TEXT_MAX_CHARS (refused before
    any scan of it) that holds no credential; ValidationError names the field. Callers that lock check it first."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(field_name, f"must be a string, got {type(value).__name__}")
    if len(value) > V.AUDIT_TEXT_MAX_CHARS:
        raise ValidationError(field_name, f"at most {V.AUDIT_TEXT_MAX_CHARS} characters (got {len(value)})")
    return gates.no_credential(field_name, value)


def record(conn: psycopg.Connection[Any], actor: str, action: str, *, project: str | None = None,
           unit_id: object = None, reason: str | None = None, details: dict[str, Any] | None = None) -> None:
    """Append one audit row in the caller's transaction; an actor or a reason that the log may not keep (`kept`) is
    refused, the caller's transaction undone."""
    kept("actor", actor)
    kept("reason", reason)
    conn.execute(query("audit/record"), {"actor": actor, "action": action, "project": project, "unit_id": unit_id,
                                         "reason": reason, "details": Jsonb(details or {})})
