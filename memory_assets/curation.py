"""Curation: near-duplicates merge, contradictions go to review, proposals get promoted, reviewers decide."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from memory_assets import audit, embeddings, gates, lifecycle, tokens
from memory_assets import vocabulary as V
from memory_assets.database import one, query
from memory_assets.errors import ValidationError

log = logging.getLogger(__name__)

Agreement = Callable[[str, str], bool]  # optional reranker hook: do two texts state the same fact?


def change_signal(a: str, b: str) -> bool:
    """Do two texts differ by a change-of-state word or a value (a number, a quarter, a date)?"""
    diff = gates.word_tokens(a) ^ gates.word_tokens(b)
    return bool(diff & set(V.CHANGE_OF_STATE_TERMS)) or any(any(ch.isdigit() for ch in t) for t in diff)


def verdict(unit: dict[str, Any], nearest: dict[str, Any] | None, agreement: Agreement | None = None) -> str | None:
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


def curate_day(conn: psycopg.Connection[Any], model_key: str, day: date,
               agreement: Agreement | None = None) -> dict[str, int]:
    """Curate the units created on a day that have a current vector; idempotent (each revision is curated once)."""
    counts = {"merged": 0, "review": 0, "promoted": 0, "unchanged": 0}
    day_end = datetime.combine(day + timedelta(days=1), time.min, tzinfo=UTC)
    with conn.cursor(row_factory=dict_row) as cur:
        day_units = cur.execute(query("curation/day_units"), day_units_params(model_key, day)).fetchall()
        for at, unit in enumerate(day_units, start=1):
            with conn.transaction():
                if at < len(day_units):  # its commit not awaited on disk (0.24 against 0.58 ms a newcomer): after a
                    # server crash a re-run of the day curates again what was lost (each revision once); the last
                    # newcomer's commit is awaited, and with it every commit before it, so the day is on disk on return
                    conn.execute("SET LOCAL synchronous_commit = off")
                nearest = nearest_older(cur, unit, model_key)
                action = verdict(unit, nearest, agreement)
                if nearest is not None and action == "merge" and merge(conn, unit, nearest):
                    counts["merged"] += 1
                elif nearest is not None and action == "review" and send_to_review(conn, unit, nearest):
                    counts["review"] += 1
                else:
                    counts["unchanged"] += 1
                # the revision judged: one corrected since is curated by the next run
                conn.execute("UPDATE memory_units SET curated_revision = %s WHERE id = %s",
                             (unit["revision"], unit["id"]))
        with conn.transaction():
            promoted = cur.execute(query("curation/promote_proposed"), {
                "day_end": day_end, "min_sources": V.PROMOTE_MIN_SOURCES,
                "cutoff": day_end - timedelta(days=V.PROMOTE_AFTER_DAYS)}).fetchall()
            for row in promoted:
                audit.record(conn, "curation", "promote", project=row["project"], unit_id=row["id"],
                             details={"day": day.isoformat()})
    counts["promoted"] = len(promoted)
    log.info("curated day=%s model=%s %s", day, model_key, counts)
    return counts


def day_units_params(model_key: str, day: date) -> dict[str, Any]:
    """The parameters of curation/day_units: the model, the day, and when a project walks the HNSW index."""
    return {"model": model_key, "day": day, "hnsw_min": V.HNSW_MIN_PROJECT_UNITS,
            "walk_min_share": V.HNSW_WALK_MIN_SHARE}


def nearest_params(unit: dict[str, Any], model_key: str) -> dict[str, Any]:
    """The parameters of both ways to a curation/day_units row's nearest older peer (curation/_older_peers)."""
    return {"unit_id": unit["id"], "project": unit["project"], "kind": unit["kind"], "number": unit["number"],
            "model": model_key, "vector": unit["embedding"], "overfetch": V.CURATION_HNSW_NEIGHBOURS}


def nearest_older(cur: psycopg.Cursor[dict[str, Any]], unit: dict[str, Any], model_key: str) -> dict[str, Any] | None:
    """A curation/day_units row's nearest older peer: in a large project through the model's HNSW index (an exact
    scan there cost each newcomer time in proportion to the project), else or when the index walk surfaces none by
    an exact scan. The walk's knobs last for the caller's transaction, or for one of its own where there is none."""
    if cur.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        with cur.connection.transaction():
            return nearest_older(cur, unit, model_key)
    params = nearest_params(unit, model_key)
    if unit["large"]:
        was = one(cur.execute(query("curation/hnsw_scan"), {"ef_search": V.HNSW_EF_SEARCH}))
        found = cur.execute(embeddings.model_query("curation/nearest_older_hnsw", model_key), params).fetchone()
        cur.execute(query("curation/hnsw_scan_done"), {"sorts": was["sorts"], "jit": was["jit"]})
        if found:
            return found
    return cur.execute(query("curation/nearest_older"), params).fetchone()


def merge(conn: psycopg.Connection[Any], unit: dict[str, Any], nearest: dict[str, Any]) -> bool:
    """Fold a near-duplicate (a curation/day_units row) into the older unit (its nearest): its sources move over,
    importance rises, the newcomer retires.

    False, and nothing changed, when either unit was forgotten (or left the live statuses) or corrected since
    curation read them: a merge never feeds a tombstone nor revives one, nor retires words it did not judge.
    """
    newcomer, canonical = unit["id"], nearest["id"]
    pair = {"canonical": canonical, "newcomer": newcomer, "canonical_revision": nearest["revision"],
            "newcomer_revision": unit["revision"]}
    hold_project(conn, unit["project"])
    if len(conn.execute(query("curation/lock_pair"), pair).fetchall()) < 2:
        return False
    conn.execute(query("curation/merge_sources"), pair)
    conn.execute(query("curation/bump_importance"), {"bump": V.MERGE_IMPORTANCE_BUMP, "unit_id": canonical})
    conn.execute(query("curation/retire_duplicate"), pair)
    audit.record(conn, "curation", "merge", project=unit["project"], unit_id=newcomer,
                 details={"into": str(canonical)})
    return True


def hold_project(conn: psycopg.Connection[Any], project: str) -> None:
    """Take, before any unit's row, the derivation lock and then the project's counter row, in the order a forget takes
    them (a write takes the counter row alone): curation/hold_counter says why."""
    lifecycle.hold_derivations(conn, project)
    conn.execute(query("curation/hold_counter"), {"project": project})


def send_to_review(conn: psycopg.Connection[Any], unit: dict[str, Any], nearest: dict[str, Any]) -> bool:
    """Send a newcomer (a curation/day_units row) to review beside the older unit it may contradict, audited; False,
    and nothing changed, when it was forgotten or corrected since curation read it."""
    hold_project(conn, unit["project"])
    if not conn.execute(query("curation/mark_review"), {"conflicts_with": nearest["id"], "unit_id": unit["id"],
                                                         "revision": unit["revision"]}).rowcount:
        return False
    audit.record(conn, "curation", "review", project=unit["project"], unit_id=unit["id"],
                 details={"conflicts_with": str(nearest["id"]), "cosine": round(nearest["cosine"], 4)})
    return True


# --- Review ---------------------------------------------------------------------------------

def review_queue(conn: psycopg.Connection[Any], project: str | None = None) -> list[dict[str, Any]]:
    """Units waiting for a human, oldest first, each with the unit it conflicts with."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(query("curation/review_queue"), {"project": project}).fetchall()


def decide(conn: psycopg.Connection[Any], project: str, token: str, decision: str, target: str | None = None,
           actor: str = "reviewer") -> dict[str, Any]:
    """Settle a unit in review: approve (active), reject (retired) or supersede another unit; always audited."""
    project = gates.project_name(project)
    gates.one_of("decision", decision, V.REVIEW_DECISIONS)
    if (decision == "supersede") != (target is not None):
        raise ValidationError("target", "supersede needs the token of the unit it replaces, and only supersede")
    audit.kept("actor", actor)  # stored as updated_by and audited: checked before the unit is locked
    with conn.transaction():
        hold_project(conn, project)  # the unit is updated twice below: the second update reads the counter row
        unit_id = tokens.unit_id_of(conn, project, token)
        row = conn.execute("SELECT status FROM memory_units WHERE id = %s FOR NO KEY UPDATE", (unit_id,)).fetchone()
        status = row[0] if row else None
        if status != V.STATUS_REVIEW:
            raise ValidationError("token", f"{token} is {status}, not in review")
        if target is not None:  # decision == "supersede"
            lifecycle.supersede(conn, unit_id, tokens.unit_id_of(conn, project, target), actor=actor)
        settled = V.STATUS_RETIRED if decision == "reject" else V.STATUS_ACTIVE
        conn.execute("UPDATE memory_units SET status = %s, updated_by = %s WHERE id = %s", (settled, actor, unit_id))
        audit.record(conn, actor, f"review_{decision}", project=project, unit_id=unit_id,
                     details={"token": token, "target": target})
    return {"token": token, "decision": decision, "target": target}
