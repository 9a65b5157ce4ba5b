"""What analysts read: read rate (the kill metric), arms, the kill list, and the health of the ledger."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone

import pandas as pd
import psycopg

from memory_assets import vocabulary as V
from memory_assets.database import query

KILL_WINDOW_DAYS = 28


def compute_read_rate(conn: psycopg.Connection, day: date) -> int:
    """Replace one day's read-rate metrics; returns the rows written."""
    start = datetime.combine(day, time.min, tzinfo=timezone.utc)
    with conn.transaction():
        conn.execute("DELETE FROM read_rate_metrics WHERE day = %s", (day,))
        return conn.execute(query("read_rate_day"), {
            "day": day, "start": start, "end": start + timedelta(days=1),
            "window_start": start + timedelta(days=1) - timedelta(days=KILL_WINDOW_DAYS),
            "min_injections": V.KILL_LIST_MIN_INJECTIONS, "max_read_rate": V.KILL_LIST_MAX_READ_RATE}).rowcount


def frame(conn: psycopg.Connection, sql: str, params=None) -> pd.DataFrame:
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return pd.DataFrame(cur.fetchall(), columns=[c.name for c in cur.description])


def read_rate_by_day(conn, project: str | None = None) -> pd.DataFrame:
    """Daily read rate by kind and arm: tasks that used a unit over tasks it was injected into."""
    return frame(conn, "SELECT day, kind, arm, sum(injections) AS injections, sum(reads) AS reads, "
                       "sum(citations) AS citations, sum(follows) AS follows, "
                       "avg(read_rate) AS read_rate FROM read_rate_metrics "
                       "WHERE %(p)s::text IS NULL OR project = %(p)s GROUP BY 1, 2, 3 ORDER BY 1, 2, 3", {"p": project})


def kill_list(conn, project: str | None = None) -> pd.DataFrame:
    """Units injected often and rarely read in the trailing window, as of their latest metrics day."""
    return frame(conn, f"SELECT DISTINCT ON (m.unit_id) m.day, m.project, {V.TOKEN_PREFIX_SQL} || u.number AS token, m.kind, m.arm "
                       "FROM read_rate_metrics m JOIN memory_units u ON u.id = m.unit_id "
                       "WHERE m.kill AND (%(p)s::text IS NULL OR m.project = %(p)s) ORDER BY m.unit_id, m.day DESC",
                 {"p": project})


def status_funnel(conn) -> pd.DataFrame:
    return frame(conn, "SELECT status, count(*) AS units FROM memory_units GROUP BY 1 ORDER BY 2 DESC")


def review_queue(conn) -> pd.DataFrame:
    return frame(conn, f"SELECT project, {V.TOKEN_PREFIX_SQL} || number AS token, kind, created_at FROM memory_units "
                       "WHERE status = 'review' ORDER BY created_at")


def decay_latest(conn) -> pd.DataFrame:
    return frame(conn, "SELECT DISTINCT ON (unit_id) day, project, recency, activation, trust, expired, stale, score "
                       "FROM decay_scores ORDER BY unit_id, day DESC")


def rejections_by_reason(conn) -> pd.DataFrame:
    return frame(conn, "SELECT day, reason, sum(count)::bigint AS rejected FROM memory_rejections GROUP BY 1, 2 ORDER BY 1, 2")
