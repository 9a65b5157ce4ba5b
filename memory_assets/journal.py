"""The change journal: bounded pages over unit changes, read with per-consumer cursors that survive restarts."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from memory_assets import vocabulary as V


@dataclass(frozen=True)
class Change:
    seq: int
    xid: int
    unit_id: str
    project: str
    revision: int
    status: str
    change: str


def cursor(conn: psycopg.Connection, consumer: str) -> tuple[int, int]:
    """Where a consumer stopped: (transaction id, sequence) of the last change it finished."""
    row = conn.execute("SELECT xid::text::bigint, seq FROM memory_cursors WHERE consumer = %s", (consumer,)).fetchone()
    return (row[0], row[1]) if row else (0, 0)


def page(conn: psycopg.Connection, consumer: str, limit: int = V.JOURNAL_PAGE_SIZE) -> list[Change]:
    """The next changes after the consumer's cursor, oldest first, only from transactions that can no longer add rows.

    Ordering by (xid, seq) below the snapshot's xmin means a page never skips a change that a slower
    transaction commits later with a smaller sequence number.
    """
    xid, seq = cursor(conn, consumer)
    rows = conn.execute(
        "SELECT seq, xid::text::bigint, unit_id::text, project, revision, status, change FROM memory_changes "
        "WHERE (xid, seq) > (%s::text::xid8, %s) AND xid < pg_snapshot_xmin(pg_current_snapshot()) "
        "ORDER BY xid, seq LIMIT %s",
        (xid, seq, limit),
    ).fetchall()
    return [Change(*row) for row in rows]


def advance(conn: psycopg.Connection, consumer: str, last: Change) -> None:
    """Record that the consumer finished every change up to `last` (call in the transaction that did the work)."""
    conn.execute(
        "INSERT INTO memory_cursors (consumer, xid, seq) VALUES (%s, %s::text::xid8, %s) "
        "ON CONFLICT (consumer) DO UPDATE SET xid = EXCLUDED.xid, seq = EXCLUDED.seq, updated_at = now()",
        (consumer, last.xid, last.seq),
    )
