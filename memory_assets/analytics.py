"""What analysts read: read rate (the kill metric), arms, the kill list, and the health of the ledger."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from statistics import NormalDist
from typing import Any

import pandas as pd
import psycopg

from memory_assets import database, gates
from memory_assets import vocabulary as V
from memory_assets.database import query
from memory_assets.errors import ValidationError

KILL_WINDOW_DAYS = 28


def connect(database_url: str | None = None, home: str | None = None) -> psycopg.Connection[Any]:
    """A connection for analysts that cannot write: it logs in as the read-only role memory_reader itself (SELECT on
    the measurements, never a unit's text; no RESET ROLE leads back to the owner) with read-only transactions, through
    MEMORY_ASSETS_ANALYST_URL when set (it must name memory_reader), else on the application's server (the argument,
    DATABASE_URL or the embedded server) with the user replaced and the owner's password left out."""
    analyst_url = None if database_url else os.environ.get(V.ANALYST_URL_ENV)
    info = psycopg.conninfo.conninfo_to_dict(analyst_url or database.database_url(database_url, home))
    if analyst_url and info.get("user") != V.READER_ROLE:
        raise ValidationError(V.ANALYST_URL_ENV, f"must name the read-only role {V.READER_ROLE} as its user")
    if not analyst_url:
        info.pop("password", None)
        info["user"] = V.READER_ROLE
    conn = psycopg.connect(psycopg.conninfo.make_conninfo("", **info), autocommit=True,
                           options="-c timezone=UTC -c default_transaction_read_only=on",
                           connect_timeout=V.CONNECT_TIMEOUT_SECONDS)
    if database.one(conn.execute("SELECT session_user"))[0] != V.READER_ROLE:  # e.g. a pgbouncer that maps users
        conn.close()
        raise ValidationError(V.ANALYST_URL_ENV, f"the server did not log in as {V.READER_ROLE}")
    return conn


def compute_read_rate(conn: psycopg.Connection[Any], day: date) -> int:
    """Replace one day's read-rate metrics and, in the same transaction, the arms' task counts of the trailing
    window ending that day (read_rate_arms); returns the metrics rows written."""
    start = datetime.combine(day, time.min, tzinfo=UTC)
    end = start + timedelta(days=1)
    with conn.transaction():
        conn.execute("DELETE FROM read_rate_metrics WHERE day = %s", (day,))
        rows = conn.execute(query("analytics/read_rate_day"), {
            "day": day, "start": start, "end": end,
            "window_start": end - timedelta(days=KILL_WINDOW_DAYS),
            "min_injections": V.KILL_LIST_MIN_INJECTIONS, "max_read_rate": V.KILL_LIST_MAX_READ_RATE}).rowcount
        conn.execute("DELETE FROM read_rate_arms WHERE day = %s", (day,))
        conn.execute(query("analytics/read_rate_arms_day"), {
            "day": day, "end": end, "window_start": end - timedelta(days=V.ARM_WINDOW_DAYS),
            "window_days": V.ARM_WINDOW_DAYS})
        return rows


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


# --- The arm comparison: memory on against the holdout --------------------------------------------------------


def z_score(confidence: float) -> float:
    """The two-sided standard normal quantile of a confidence level (1.96 for 0.95), which sets an interval's width."""
    if not 0 < confidence < 1:
        raise ValidationError("confidence", f"must lie strictly between 0 and 1 (got {gates.shown(confidence)})")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def _check_counts(successes: int, trials: int) -> None:
    """Counts an interval can be built from, so a bad join shows up as an error instead of a rate above 1."""
    if trials < 0 or not 0 <= successes <= trials:
        raise ValidationError("successes", f"need 0 <= successes <= trials (got {successes} of {trials})")


def wilson_interval(successes: int, trials: int, confidence: float = V.ARM_CONFIDENCE) -> tuple[float, float]:
    """Wilson's score interval for a proportion: unlike rate ± z·se it stays inside [0, 1] and keeps its coverage
    with few tasks or rates near 0 or 1, where the arms of a young experiment sit; (0, 1) without any task."""
    _check_counts(successes, trials)
    z = z_score(confidence)
    if trials == 0:
        return 0.0, 1.0
    p, z2 = successes / trials, z * z
    denominator = 1 + z2 / trials
    centre = (p + z2 / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / denominator
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return low, high


def difference_interval(successes_a: int, trials_a: int, successes_b: int, trials_b: int,
                        confidence: float = V.ARM_CONFIDENCE) -> tuple[float, float]:
    """Newcombe's hybrid score interval (his method 10) for rate a - rate b, built from the two Wilson intervals:
    close to its nominal coverage for small arms, where the Wald interval is too narrow; (-1, 1) when an arm is
    empty."""
    low_a, high_a = wilson_interval(successes_a, trials_a, confidence)
    low_b, high_b = wilson_interval(successes_b, trials_b, confidence)
    if trials_a == 0 or trials_b == 0:
        return -1.0, 1.0
    p_a, p_b = successes_a / trials_a, successes_b / trials_b
    difference = p_a - p_b
    return (max(-1.0, difference - math.hypot(p_a - low_a, high_b - p_b)),
            min(1.0, difference + math.hypot(high_a - p_a, p_b - low_b)))


@dataclass(frozen=True)
class ArmRate:
    """One arm's share of tasks that used memory, with its Wilson interval."""

    arm: str
    tasks: int
    used: int
    rate: float | None
    low: float
    high: float


@dataclass(frozen=True)
class ArmComparison:
    """Memory on against the holdout: each arm's rate, the difference with its interval, and a verdict in words that
    says when the arms are too small for the numbers to mean anything."""

    on: ArmRate
    holdout: ArmRate
    difference: float | None
    low: float
    high: float
    confidence: float
    enough: bool
    verdict: str

    def table(self) -> pd.DataFrame:
        """The comparison as rows (each arm, then the difference), for a notebook to show next to its plot."""
        level = f"{self.confidence:.0%} CI"
        rows: list[tuple[Any, ...]] = [(a.arm, a.tasks, a.used, a.rate, a.low, a.high) for a in (self.on, self.holdout)]
        rows.append(("difference (on - holdout)", None, None, self.difference, self.low, self.high))
        table = pd.DataFrame(rows, columns=["arm", "tasks", "used memory", "rate", f"{level} low", f"{level} high"])
        return table.astype({"tasks": "Int64", "used memory": "Int64"})


def arm_rate(arm: str, used: int, tasks: int, confidence: float = V.ARM_CONFIDENCE) -> ArmRate:
    """One arm's rate and Wilson interval from its counts."""
    low, high = wilson_interval(used, tasks, confidence)
    return ArmRate(arm, tasks, used, used / tasks if tasks else None, low, high)


def compare_arms(on_used: int, on_tasks: int, holdout_used: int, holdout_tasks: int, *,
                 confidence: float = V.ARM_CONFIDENCE, min_tasks: int = V.ARM_MIN_TASKS) -> ArmComparison:
    """Compare the share of tasks that used memory with memory on and in the holdout: Wilson intervals per arm,
    Newcombe's interval for the difference, and a verdict that refuses to read anything into arms below
    `min_tasks` tasks (ARM_MIN_TASKS), however large the difference looks."""
    on = arm_rate("on", on_used, on_tasks, confidence)
    holdout = arm_rate("holdout", holdout_used, holdout_tasks, confidence)
    low, high = difference_interval(on_used, on_tasks, holdout_used, holdout_tasks, confidence)
    difference = on.rate - holdout.rate if on.rate is not None and holdout.rate is not None else None
    enough = min(on_tasks, holdout_tasks) >= max(min_tasks, 1)
    if not enough:
        verdict = (f"Too few tasks to compare: memory on has {on_tasks}, the holdout {holdout_tasks}; each arm needs "
                   f"at least {min_tasks} (ARM_MIN_TASKS) before the difference means anything.")
    else:
        rates = (f"{on_used / on_tasks:.1%} of tasks used memory with memory on, "
                 f"{holdout_used / holdout_tasks:.1%} in the holdout; difference "
                 f"{on_used / on_tasks - holdout_used / holdout_tasks:+.1%} "
                 f"({confidence:.0%} CI {low:+.1%} to {high:+.1%})")
        if low > 0:
            verdict = f"Memory on is higher: {rates}."
        elif high < 0:
            verdict = f"Memory on is lower: {rates}."
        else:
            verdict = f"No difference shown: {rates}, an interval that includes 0."
    return ArmComparison(on, holdout, difference, low, high, confidence, enough, verdict)


def arm_counts(conn: psycopg.Connection[Any], day: date | None = None) -> pd.DataFrame:
    """Per-arm task counts (read_rate_arms) of every window end, or of one day."""
    return frame(conn, query("analytics/arm_counts"), {"day": day})


def randomised_arms(counts: pd.DataFrame, confidence: float = V.ARM_CONFIDENCE) -> pd.DataFrame:
    """The two randomised arms of arm counts per day (memory on by default, the holdout) with rate and Wilson
    interval per row: what the comparison plots over time."""
    rows = []
    for name, arm in (("on", V.ARM_ON), ("holdout", V.ARM_HOLDOUT)):
        for row in counts.to_dict("records"):
            if (row["arm"], row["source"]) == arm:
                rate = arm_rate(name, int(row["used_tasks"]), int(row["tasks"]), confidence)
                rows.append((row["day"], name, rate.tasks, rate.used, rate.rate, rate.low, rate.high))
    arms = pd.DataFrame(rows, columns=["day", "arm", "tasks", "used", "rate", "low", "high"])
    return arms.sort_values(["day", "arm"], ignore_index=True)


def arm_comparison(conn: psycopg.Connection[Any], day: date | None = None) -> ArmComparison:
    """The arm comparison of the latest window end in read_rate_arms (or of `day`); empty arms when none exists."""
    arms = randomised_arms(arm_counts(conn, day))
    if not arms.empty:
        arms = arms[arms["day"] == arms["day"].max()]
    by_arm = {row["arm"]: (int(row["used"]), int(row["tasks"])) for row in arms.to_dict("records")}
    (on_used, on_tasks), (holdout_used, holdout_tasks) = by_arm.get("on", (0, 0)), by_arm.get("holdout", (0, 0))
    return compare_arms(on_used, on_tasks, holdout_used, holdout_tasks)
