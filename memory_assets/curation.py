"""Curation: near-duplicates merge, contradictions go to review, proposals get promoted, reviewers decide."""

from __future__ import annotations

import logging
from datetime import date, datetime, time, timedelta, timezone
from typing import Callable

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from memory_assets import gates, ledger
from memory_assets import vocabulary as V

log = logging.getLogger(__name__)

Agreement = Callable[[str, str], bool]  # optional reranker hook: do two texts state the same fact?

# a newcomer is compared with older units every reader sees: a merge never widens a private unit's audience
NEAREST_OLDER = f"""
SELECT o.id, o.number, o.title, o.body, 1 - (e.embedding <=> n.embedding) AS cosine
FROM memory_embeddings n
JOIN memory_units o ON o.project = %(project)s AND o.kind = %(kind)s AND o.number < %(number)s
                   AND o.status IN {V.LIVE_STATUS_SQL} AND o.private_to IS NULL
JOIN memory_embeddings e ON e.unit_id = o.id AND e.model_key = n.model_key
                        AND e.unit_revision = o.revision AND e.content_hash = o.content_hash
WHERE n.unit_id = %(unit_id)s AND n.model_key = %(model)s
ORDER BY e.embedding <=> n.embedding
LIMIT 1
"""

DAY_UNITS = """
SELECT u.id, u.project, u.number, u.kind, u.type, u.status, u.title, u.body
FROM memory_units u
JOIN memory_embeddings e ON e.unit_id = u.id AND e.model_key = %(model)s
                        AND e.unit_revision = u.revision AND e.content_hash = u.content_hash
WHERE (u.created_at AT TIME ZONE 'UTC')::date = %(day)s AND u.status IN ('proposed', 'active')
  AND u.curated_revision IS DISTINCT FROM u.revision
ORDER BY u.project, u.number
"""


# Proposed units curated without a conflict become active once confirmed by enough independent sources, or
# once they are old enough, judged at the end of the partition's day (so a re-run of the day decides the same).
PROMOTE = """
UPDATE memory_units u SET status = 'active', updated_by = 'curation'
WHERE u.status = 'proposed' AND u.curated_revision = u.revision AND u.conflicts_with IS NULL
  AND u.created_at < %(day_end)s
  AND (u.created_at <= %(cutoff)s
       OR (SELECT count(DISTINCT s.task_id) FROM memory_sources s WHERE s.unit_id = u.id) >= %(min_sources)s)
RETURNING u.id, u.project
"""


def change_signal(a: str, b: str) -> bool:
    """Do two texts differ by a change-of-state word or a value (a number, a quarter, a date)?"""
    diff = gates.word_tokens(a) ^ gates.word_tokens(b)
    return bool(diff & set(V.CHANGE_OF_STATE_TERMS)) or any(any(ch.isdigit() for ch in t) for t in diff)


def verdict(unit: dict, nearest: dict | None, agreement: Agreement | None = None) -> str | None:
    """What curation does with a unit given its nearest older neighbour: merge, review or nothing."""
    if nearest is None:
        return None
    cosine = nearest["cosine"]
    text, other = f"{unit['title']}\n{unit['body']}", f"{nearest['title']}\n{nearest['body']}"
    if cosine >= V.MERGE_MIN_COSINE and (agreement is None or agreement(text, other)):
        return "merge"
    if unit["type"] in V.CURATION_TYPES and (
        cosine >= V.REVIEW_MIN_COSINE or (cosine >= V.CONTRADICTION_MIN_COSINE and change_signal(text, other))
    ):
        return "review"
    return None


def curate_day(conn: psycopg.Connection, model_key: str, day: date, agreement: Agreement | None = None) -> dict:
    """Curate the units created on a day that have a current vector; idempotent (each revision is curated once)."""
    counts = {"merged": 0, "review": 0, "promoted": 0, "unchanged": 0}
    day_end = datetime.combine(day + timedelta(days=1), time.min, tzinfo=timezone.utc)
    with conn.cursor(row_factory=dict_row) as cur:
        units = cur.execute(DAY_UNITS, {"model": model_key, "day": day}).fetchall()
        for unit in units:
            with conn.transaction():
                nearest = cur.execute(NEAREST_OLDER, {"project": unit["project"], "kind": unit["kind"],
                                                      "number": unit["number"], "unit_id": unit["id"],
                                                      "model": model_key}).fetchone()
                action = verdict(unit, nearest, agreement)
                if action == "merge":
                    merge(conn, unit["id"], nearest["id"])
                    counts["merged"] += 1
                elif action == "review":
                    conn.execute("UPDATE memory_units SET status = 'review', conflicts_with = %s, updated_by = 'curation' "
                                 "WHERE id = %s", (nearest["id"], unit["id"]))
                    audit(conn, "curation", "review", unit["project"], unit["id"], {"conflicts_with": str(nearest["id"]),
                                                                                 "cosine": round(nearest["cosine"], 4)})
                    counts["review"] += 1
                else:
                    counts["unchanged"] += 1
                conn.execute("UPDATE memory_units SET curated_revision = revision WHERE id = %s", (unit["id"],))
        with conn.transaction():
            promoted = cur.execute(PROMOTE, {"day_end": day_end, "min_sources": V.PROMOTE_MIN_SOURCES,
                                             "cutoff": day_end - timedelta(days=V.PROMOTE_AFTER_DAYS)}).fetchall()
            for row in promoted:
                audit(conn, "curation", "promote", row["project"], row["id"], {"day": day.isoformat()})
    counts["promoted"] = len(promoted)
    log.info("curated day=%s model=%s %s", day, model_key, counts)
    return counts


def merge(conn: psycopg.Connection, newcomer: str, canonical: str) -> None:
    """Fold a near-duplicate into the older unit: its sources move over, importance rises, the newcomer retires."""
    conn.execute(
        "INSERT INTO memory_sources (unit_id, project, feed, task_id, session_id, persona, model, observed_sha, "
        "source_ref, visibility, inbox_id, created_at) "
        "SELECT %s, project, feed, task_id, session_id, persona, model, observed_sha, source_ref, visibility, "
        "inbox_id, created_at "
        "FROM memory_sources WHERE unit_id = %s ORDER BY id ON CONFLICT (unit_id, task_id) DO NOTHING",
        (canonical, newcomer),
    )
    conn.execute("UPDATE memory_units SET importance = least(1.0, importance + %s), updated_by = 'curation' "
                 "WHERE id = %s", (V.MERGE_IMPORTANCE_BUMP, canonical))
    project = conn.execute("UPDATE memory_units SET status = 'retired', duplicate_of = %s, updated_by = 'curation' "
                           "WHERE id = %s RETURNING project", (canonical, newcomer)).fetchone()[0]
    audit(conn, "curation", "merge", project, newcomer, {"into": str(canonical)})


def audit(conn: psycopg.Connection, actor: str, action: str, project: str, unit_id, details: dict,
          reason: str | None = None) -> None:
    conn.execute("INSERT INTO audit_log (actor, action, project, unit_id, reason, details) VALUES (%s, %s, %s, %s, %s, %s)",
                 (actor, action, project, unit_id, reason, Jsonb(details)))


# --- Review ---------------------------------------------------------------------------------

def review_queue(conn: psycopg.Connection, project: str | None = None) -> list[dict]:
    """Units waiting for a human, oldest first, each with the unit it conflicts with."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            f"SELECT u.project, {V.TOKEN_PREFIX_SQL} || u.number AS token, u.kind, u.type, u.title, u.confidence, u.created_at, "
            f"CASE WHEN c.id IS NULL THEN NULL ELSE {V.TOKEN_PREFIX_SQL} || c.number END AS conflicts_with, c.title AS conflict_title "
            "FROM memory_units u LEFT JOIN memory_units c ON c.id = u.conflicts_with "
            "WHERE u.status = 'review' AND (%(p)s::text IS NULL OR u.project = %(p)s) ORDER BY u.created_at, u.number",
            {"p": project},
        ).fetchall()
    return rows


def decide(conn: psycopg.Connection, project: str, token: str, decision: str, target: str | None = None,
           actor: str = "reviewer") -> dict:
    """Settle a unit in review: approve (active), reject (retired) or supersede another unit; always audited."""
    from memory_assets import lifecycle

    if decision not in V.REVIEW_DECISIONS:
        raise gates.ValidationError("decision", f"must be one of {', '.join(V.REVIEW_DECISIONS)} (got {decision!r})")
    if (decision == "supersede") != (target is not None):
        raise gates.ValidationError("target", "supersede needs the token of the unit it replaces, and only supersede")
    with conn.transaction():
        unit_id = ledger.unit_id_of(conn, project, token)
        status = conn.execute("SELECT status FROM memory_units WHERE id = %s FOR UPDATE", (unit_id,)).fetchone()[0]
        if status != "review":
            raise gates.ValidationError("token", f"{token} is {status}, not in review")
        if decision == "approve":
            conn.execute("UPDATE memory_units SET status = 'active', updated_by = %s WHERE id = %s", (actor, unit_id))
        elif decision == "reject":
            conn.execute("UPDATE memory_units SET status = 'retired', updated_by = %s WHERE id = %s", (actor, unit_id))
        else:
            old_id = ledger.unit_id_of(conn, project, target)
            lifecycle.supersede(conn, unit_id, old_id, actor=actor)
            conn.execute("UPDATE memory_units SET status = 'active', updated_by = %s WHERE id = %s", (actor, unit_id))
        audit(conn, actor, f"review_{decision}", project, unit_id, {"token": token, "target": target})
    return {"token": token, "decision": decision, "target": target}
