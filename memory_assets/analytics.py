"""What analysts read: read rate (the kill metric), arms, the kill list, and the health of the ledger."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import pandas as pd
import psycopg

from memory_assets import database
from memory_assets import vocabulary as V
from memory_assets.database import query

KILL_WINDOW_DAYS = 28


def connect(database_url: str | None = None, home: str | None = None) -> psycopg.Connection[Any]:
    """A connection for analysts that cannot write: it runs as the read-only role memory_reader (SELECT on the
    memory tables, never a unit's text) in read-only transactions, on DATABASE_URL or the embedded server."""
    url = database.database_url(database_url, home)
    options = f"-c timezone=UTC -c role={V.READER_ROLE} -c default_transaction_read_only=on"
    return psycopg.connect(url, autocommit=True, options=options)


def compute_read_rate(conn: psycopg.Connection[Any], day: date) -> int:
    """Replace one day's read-rate metrics; returns the rows written."""
    start = datetime.combine(day, time.min, tzinfo=UTC)
    with conn.transaction():
        conn.execute("DELETE FROM read_rate_metrics WHERE day = %s", (day,))
        return conn.execute(query("analytics/read_rate_day"), {
            "day": day, "start": start, "end": start + timedelta(days=1),
            "window_start": start + timedelta(days=1) - timedelta(days=KILL_WINDOW_DAYS),
            "min_injections": V.KILL_LIST_MIN_INJECTIONS, "max_read_rate": V.KILL_LIST_MAX_READ_RATE}).rowcount


def frame(conn: psycopg.Connection[Any], sql: str, params: dict[str, Any] | None = None) -> pd.DataFrame:
    """A query's rows as a frame with the query's column names, for notebooks and metadata."""
    with conn.cursor() as cur:
        cur.execute(sql, params)
        columns = [c.name for c in cur.description or []]
        return pd.DataFrame(cur.fetchall(), columns=columns)


def read_rate_by_day(conn: psycopg.Connection[Any], project: str | None = None) -> pd.DataFrame:
    """Daily read rate by kind and arm: tasks that used a unit over tasks it was injected into."""
    return frame(conn, query("analytics/read_rate_by_day"), {"p": project})


def kill_list(conn: psycopg.Connection[Any], project: str | None = None) -> pd.DataFrame:
    """Units injected often and rarely read in the trailing window, as of their latest metrics day."""
    return frame(conn, query("analytics/kill_list"), {"p": project})


def status_funnel(conn: psycopg.Connection[Any]) -> pd.DataFrame:
    """Units per status, largest first: where the ledger's units sit in their life."""
    return frame(conn, "SELECT status, count(*) AS units FROM memory_units GROUP BY 1 ORDER BY 2 DESC")


def review_queue(conn: psycopg.Connection[Any]) -> pd.DataFrame:
    """Units waiting for a review decision, oldest first, so a reviewer starts with the longest waiting."""
    return frame(conn, query("analytics/review_queue"))


def decay_latest(conn: psycopg.Connection[Any]) -> pd.DataFrame:
    """Each unit's latest decay score, to see what recall ranks down and what goes stale next."""
    return frame(conn, query("analytics/decay_latest"))


def rejections_by_reason(conn: psycopg.Connection[Any]) -> pd.DataFrame:
    """Rejected candidates per day and reason, to see which gate fires and when."""
    sql = "SELECT day, reason, sum(count)::bigint AS rejected FROM memory_rejections GROUP BY 1, 2 ORDER BY 1, 2"
    return frame(conn, sql)
