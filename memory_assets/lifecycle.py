"""Lifecycle transitions that keep history: supersession (never overwrite), forget, votes and chains."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from memory_assets import audit, authz, bundle, gates, tokens
from memory_assets import vocabulary as V
from memory_assets.database import query
from memory_assets.errors import ScopeError, ValidationError


def supersede(conn: psycopg.Connection[Any], new_id: Any, old_id: Any, actor: str = "api") -> None:
    """Make `new_id` replace `old_id`: the old row is closed (valid_until, superseded) and stays queryable as_of."""
    if str(new_id) == str(old_id):
        raise ValidationError("supersedes", "a unit cannot supersede itself")
    ids = {"new_id": new_id, "old_id": old_id}
    if conn.execute(query("lifecycle/supersession_cycle"), ids).fetchone():
        raise ValidationError("supersedes", "would create a supersession cycle")
    narrower = conn.execute(query("lifecycle/narrows_audience"), ids).fetchone()
    if narrower and narrower[0]:  # every reader of the old unit must be able to read its replacement
        raise ValidationError("supersedes", "a private unit cannot replace one that more readers see "
                                            "(they would lose the fact)")
    row = conn.execute(query("lifecycle/close_superseded"), {"actor": actor, "old_id": old_id}).fetchone()
    if row is None:
        raise ValidationError("supersedes", "the superseded unit is not live")
    conn.execute("UPDATE memory_units SET supersedes_id = %s, updated_by = %s WHERE id = %s", (old_id, actor, new_id))
    audit.record(conn, actor, "supersede", project=row[0], unit_id=new_id, details={"supersedes": str(old_id)})


def forget(conn: psycopg.Connection[Any], project: str, token: str, actor: authz.Actor,
           reason: str | None = None) -> str:
    """Tombstone a unit for good: text blanked wherever it was captured, vectors deleted, id/number/audit kept.

    Allowed only with the forget scope, which row-level security enforces on the tombstoning UPDATE.
    """
    if not actor.may("forget", project):
        raise ScopeError(f"forget: actor {actor.name} has no forget scope on project {project}")
    number = tokens.number_of(token)
    with conn.transaction():
        with authz.scoped(conn, actor):
            row = conn.execute(query("lifecycle/tombstone_unit"),
                               {"actor": actor.name, "project": project, "number": number}).fetchone()
        if row is None:
            raise ValidationError("token", f"no live unit {token} in project {project}")
        unit_id = row[0]
        # the trigger memory_units_forget_vectors deleted its vectors in this same transaction
        conn.execute(query("lifecycle/blank_inbox_text"), {"unit_id": unit_id})
        # past bundle revisions lose the unit too; the next revision is compiled without it
        conn.execute(query("lifecycle/forget_in_bundles"), {"project": project, "token": token})
        audit.record(conn, actor.name, "forget", project=project, unit_id=unit_id, reason=reason)
    bundle.compile_bundle(conn, project)
    return str(unit_id)


def trust_of(confirms: int, flags: int) -> float:
    """Beta-style mean: starts at the default trust, rises with confirmations, falls with flags."""
    weight = V.TRUST_PRIOR_WEIGHT
    return (confirms + weight * V.DEFAULT_TRUST) / (confirms + flags + weight)


def vote(conn: psycopg.Connection[Any], project: str, token: str, task_id: str, value: int,
         actor: str = "api") -> dict[str, Any]:
    """Record one vote per (unit, task); recount confirms and flags, recompute trust, flag past the threshold."""
    task_id = gates.text_field("task_id", task_id, V.ID_MAX_CHARS)
    with conn.transaction():
        unit_id = tokens.unit_id_of(conn, project, token)
        conn.execute("SELECT 1 FROM memory_units WHERE id = %s FOR UPDATE", (unit_id,))  # votes of a unit serialise
        voted = conn.execute(query("lifecycle/cast_vote"), {"unit_id": unit_id, "project": project,
                                                            "task_id": task_id, "vote": value,
                                                            "actor": actor}).fetchone()
        counted = conn.execute(query("lifecycle/count_votes"), {"unit_id": unit_id}).fetchone()
        assert voted is not None and counted is not None  # aggregates: always one row
        changed, (confirms, flags) = voted[0], counted
        trust = trust_of(confirms, flags)
        applied = conn.execute(query("lifecycle/apply_votes"), {
            "confirms": confirms, "flags": flags, "trust": trust, "vote": value, "changed": changed,
            "unit_id": unit_id, "threshold": V.FLAG_THRESHOLD}).fetchone()
        assert applied is not None  # the unit exists and is locked
        status = applied[0]
        if changed:
            audit.record(conn, actor, "confirm" if value > 0 else "flag", project=project, unit_id=unit_id,
                         details={"task_id": task_id})
    return {"token": token, "confirms": confirms, "flags": flags, "trust": round(trust, 4), "status": status}


def history(conn: psycopg.Connection[Any], project: str, token: str) -> list[dict[str, Any]]:
    """The supersession chain through a unit, oldest first, walked both ways."""
    unit_id = tokens.unit_id_of(conn, project, token)
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(query("lifecycle/supersession_chain"), {"unit_id": unit_id}).fetchall()
