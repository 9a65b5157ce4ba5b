"""The change journal: bounded pages over unit changes, read with per-consumer cursors that survive restarts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from memory_assets import vocabulary as V
from memory_assets.database import query


@dataclass(frozen=True)
class Change:
    """One journal row: a unit's insert, update or delete, at its revision and status."""

    seq: int
    xid: int
    unit_id: str
    project: str
    revision: int
    status: str
    change: str


def cursor(conn: psycopg.Connection[Any], consumer: str) -> tuple[int, int]:
    """Where a consumer stopped: (transaction id, sequence) of the last change it finished."""
    row = conn.execute("SELECT xid::text::bigint, seq FROM memory_cursors WHERE consumer = %s", (consumer,)).fetchone()
    return (row[0], row[1]) if row else (0, 0)


def page(conn: psycopg.Connection[Any], consumer: str, limit: int = V.JOURNAL_PAGE_SIZE) -> list[Change]:
    """The next changes after the consumer's cursor, oldest first, only from transactions that can no longer add rows.

    Ordering by (xid, seq) below the snapshot's xmin means a page never skips a change that a slower
    transaction commits later with a smaller sequence number.
    """
    return page_after(conn, cursor(conn, consumer), limit)


def page_after(conn: psycopg.Connection[Any], position: tuple[int, int],
               limit: int = V.JOURNAL_PAGE_SIZE) -> list[Change]:
    """The next changes after a (transaction id, sequence) position a consumer keeps elsewhere (a sensor cursor)."""
    xid, seq = position
    rows = conn.execute(query("journal/page_changes"), {"xid": xid, "seq": seq, "limit": limit}).fetchall()
    return [Change(*row) for row in rows]


def position_text(position: tuple[int, int]) -> str:
    """A journal position as text ("xid.seq"), the form a Dagster sensor cursor stores."""
    return f"{position[0]}.{position[1]}"


def parse_position(text: str | None) -> tuple[int, int]:
    """The position position_text wrote; the journal's start for no cursor (a sensor's first tick)."""
    if not text:
        return (0, 0)
    xid, _, seq = text.partition(".")
    return (int(xid), int(seq))


def advance(conn: psycopg.Connection[Any], consumer: str, last: Change) -> None:
    """Record that the consumer finished every change up to `last` (call in the transaction that did the work)."""
    conn.execute(query("journal/advance_cursor"), {"consumer": consumer, "xid": last.xid, "seq": last.seq})
