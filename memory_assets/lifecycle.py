"""Lifecycle transitions that keep history: supersession (never overwrite) and its chains."""

from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from memory_assets import gates


def supersede(conn: psycopg.Connection, new_id, old_id, actor: str = "api") -> None:
    """Make `new_id` replace `old_id`: the old row is closed (valid_until, superseded) and stays queryable as_of."""
    if str(new_id) == str(old_id):
        raise gates.ValidationError("supersedes", "a unit cannot supersede itself")
    chain = conn.execute(
        "WITH RECURSIVE back(id) AS (SELECT supersedes_id FROM memory_units WHERE id = %s "
        " UNION SELECT u.supersedes_id FROM memory_units u JOIN back ON u.id = back.id WHERE u.supersedes_id IS NOT NULL) "
        "SELECT 1 FROM back WHERE id = %s",
        (old_id, new_id),
    ).fetchone()
    if chain:
        raise gates.ValidationError("supersedes", "would create a supersession cycle")
    row = conn.execute(
        "UPDATE memory_units SET status = 'superseded', valid_until = greatest(valid_from, now()), updated_by = %s "
        "WHERE id = %s AND status IN ('proposed', 'review', 'active', 'flagged', 'stale') RETURNING project",
        (actor, old_id),
    ).fetchone()
    if row is None:
        raise gates.ValidationError("supersedes", "the superseded unit is not live")
    conn.execute("UPDATE memory_units SET supersedes_id = %s, updated_by = %s WHERE id = %s", (old_id, actor, new_id))
    conn.execute("INSERT INTO audit_log (actor, action, project, unit_id, details) VALUES (%s, 'supersede', %s, %s, %s)",
                 (actor, row[0], new_id, Jsonb({"supersedes": str(old_id)})))


def forget(conn: psycopg.Connection, unit_id, actor: str = "api", reason: str | None = None) -> None:
    """Tombstone a unit for good: text blanked everywhere it was captured, vectors deleted, id/number/audit kept."""
    with conn.transaction():
        row = conn.execute(
            "UPDATE memory_units SET status = 'forgotten', title = '', body = '', paths = '{}', keywords = '{}', "
            "personas = '{}', valid_until = coalesce(valid_until, greatest(valid_from, now())), updated_by = %s "
            "WHERE id = %s AND status <> 'forgotten' RETURNING project",
            (actor, unit_id),
        ).fetchone()
        # the trigger memory_units_forget_vectors has deleted the vectors in this transaction
        conn.execute("DELETE FROM memory_embeddings WHERE unit_id = %s", (unit_id,))
        conn.execute("UPDATE memory_inbox SET title = '', body = '', paths = '{}', keywords = '{}' WHERE unit_id = %s",
                     (unit_id,))
        if row:
            conn.execute("INSERT INTO audit_log (actor, action, project, unit_id, reason) VALUES (%s, 'forget', %s, %s, %s)",
                         (actor, row[0], unit_id, reason))
