"""Daily decay: recency, activation from use, trust that fades without confirmation, episodic TTL."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import psycopg

from memory_assets import vocabulary as V
from memory_assets.database import hold, query


def day_end(day: date) -> datetime:
    """The instant a day's scores are computed at: everything dated before it counts."""
    return datetime.combine(day + timedelta(days=1), time.min, tzinfo=UTC)


def score_day(conn: psycopg.Connection[Any], day: date) -> dict[str, int]:
    """Replace the day's decay scores, then mark expired episodes and stale units (never the other way back) unless a
    later day was scored; one day at a time."""
    t = day_end(day)
    params = {
        "day": day, "t": t, "w_read": V.ACTIVATION_WEIGHTS["read"], "w_cited": V.ACTIVATION_WEIGHTS["cited"],
        "w_followed": V.ACTIVATION_WEIGHTS["followed"], "activation_half_life": V.ACTIVATION_HALF_LIFE_DAYS,
        "prior_weight": V.TRUST_PRIOR_WEIGHT, "default_trust": V.DEFAULT_TRUST, "grace": V.TRUST_DECAY_AFTER_DAYS,
        "grace_confirmed": V.TRUST_DECAY_AFTER_DAYS_CONFIRMED, "half_life": V.DECAY_HALF_LIFE_DAYS,
        "floor": V.TRUST_FLOOR, "trust_half_life": V.TRUST_DECAY_HALF_LIFE_DAYS, "ttl": V.EPISODIC_TTL_DAYS,
        "stale_below": V.STALE_BELOW_TRUST,
    }
    with conn.transaction():
        # one day at a time: an earlier day's marks must see a later day scored meanwhile (a backfill beside the
        # daily run), and two runs of one day must not collide on its rows
        hold(conn, V.DECAY_LOCK)
        conn.execute("DELETE FROM decay_scores WHERE day = %s", (day,))
        scored = conn.execute(query("decay/score_day"), params).rowcount
        expired = conn.execute(query("decay/expire_units"), {"t": t, "day": day}).rowcount
        stale = conn.execute(query("decay/mark_stale"), {"day": day}).rowcount
    return {"scored": scored, "expired": expired, "stale": stale}
