"""Lifecycle transitions that keep history: supersession (never overwrite), forget, votes and chains."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from memory_assets import audit, authz, bundle, events, gates, tokens
from memory_assets import vocabulary as V
from memory_assets.database import hold, query
from memory_assets.errors import ScopeError, ValidationError


def supersede(conn: psycopg.Connection[Any], new_id: Any, old_id: Any, actor: str = "api") -> None:
    """Make `new_id` replace `old_id` (in the caller's transaction): the old row is closed (valid_until, superseded)
    and stays queryable as_of. The new unit must be live and replace nothing yet, so a chain stays one line: a
    write whose text is a duplicate of a unit that already replaces another cannot re-point it. That also rules out
    a cycle: an ancestor of `old_id` was superseded, and a superseded unit is never live again."""
    if str(new_id) == str(old_id):
        raise ValidationError("supersedes", "a unit cannot supersede itself")
    ids = {"new_id": new_id, "old_id": old_id}
    locked = {row[0]: row[1:] for row in conn.execute(query("lifecycle/lock_supersession"), ids)}
    live, replaces = locked.get(str(new_id), (False, None))
    if not live or replaces is not None:
        raise ValidationError("supersedes", "the replacing unit is no longer live or already replaces another unit")
    narrower = conn.execute(query("lifecycle/narrows_audience"), ids).fetchone()
    if narrower and narrower[0]:  # every reader of the old unit must be able to read its replacement
        raise ValidationError("supersedes", "a private unit cannot replace one that more readers see "
                                            "(they would lose the fact)")
    row = conn.execute(query("lifecycle/close_superseded"), {"actor": actor, "old_id": old_id}).fetchone()
    if row is None:
        raise ValidationError("supersedes", "the superseded unit is not live")
    conn.execute("UPDATE memory_units SET supersedes_id = %s, updated_by = %s WHERE id = %s", (old_id, actor, new_id))
    audit.record(conn, actor, "supersede", project=row[0], unit_id=new_id, details={"supersedes": str(old_id)})


def hold_derivations(conn: psycopg.Connection[Any], project: str) -> None:
    """Serialise, until commit, a forget with the work that derives text from units (consolidation, merges) in a
    project: neither builds on a unit the other is about to change, and neither waits on the other's row locks."""
    hold(conn, V.DERIVATIONS_LOCK.format(project=project))


def forget(conn: psycopg.Connection[Any], project: str, token: str, actor: authz.Actor,
           reason: str | None = None) -> str:
    """Tombstone a unit for good: text blanked wherever it was captured, vectors deleted, id/number/audit kept.

    Derived text goes with it in the same transaction: the weekly summaries built from it (tombstoned, their
    clusters dropped for the next run to rebuild from the other members) and the near-duplicates a merge retired
    into it; the sources a merge copied from it leave the unit it was merged into. Allowed only with the forget
    scope, which row-level security enforces on every tombstoning UPDATE.
    """
    project = gates.project_name(project)
    if not actor.may("forget", project):
        raise ScopeError(f"forget: actor {actor.name} has no forget scope on project {project}")
    number = tokens.number_of(token)
    reason = audit.kept("reason", reason)  # before any lock: an agent's reason of any size was scanned under them
    with conn.transaction():
        hold_derivations(conn, project)
        # a running compile finishes (and stores its revision, scrubbed below) before the counter row is taken, so
        # the project's writes never wait for a compile behind this forget; none starts until it commits
        bundle.hold_bundles(conn, project)
        conn.execute(query("lifecycle/hold_folds"), {"project": project})
        with authz.scoped(conn, actor):
            row = conn.execute(query("lifecycle/tombstone_unit"),
                               {"actor": actor.name, "project": project, "number": number}).fetchone()
        if row is None:
            raise ValidationError("token", f"no live unit {token} in project {project}")
        unit_id = row[0]
        forgotten = {unit_id: tokens.token_of(number)} | tombstone_derived(conn, project, [unit_id], actor)
        # the trigger memory_units_forget_vectors deleted their vectors in this same transaction
        ids = list(forgotten)
        conn.execute(query("lifecycle/drop_merged_sources"), {"ids": ids})
        conn.execute(query("lifecycle/drop_derived_clusters"), {"ids": ids})
        conn.execute(query("lifecycle/blank_inbox_text"), {"ids": ids})
        # past bundle revisions lose the units too (the bundle lock above let a compile that read them store its
        # revision first); the next revision is compiled without them
        conn.execute(query("lifecycle/forget_in_bundles"), {"project": project, "tokens": list(forgotten.values())})
        audit.record(conn, actor.name, V.AUDIT_FORGET, project=project, unit_id=unit_id, reason=reason)
        for derived in ids[1:]:
            audit.record(conn, actor.name, V.AUDIT_FORGET, project=project, unit_id=derived, reason=reason,
                         details={"derived_from": str(unit_id)})
    bundle.compile_bundle(conn, project)
    return str(unit_id)


def tombstone_derived(conn: psycopg.Connection[Any], project: str, roots: list[Any],
                      actor: authz.Actor) -> dict[Any, str]:
    """Tombstone, as the actor, every unit whose text derives from the roots, transitively; their ids and tokens."""
    tombstoned: dict[Any, str] = {}
    frontier = roots
    while frontier:
        derived = [r[0] for r in conn.execute(query("lifecycle/derived_units"),
                                              {"ids": frontier, "project": project,
                                               "feed": V.FEED_CONSOLIDATION}).fetchall()]
        if not derived:
            break
        with authz.scoped(conn, actor):
            rows = conn.execute(query("lifecycle/tombstone_units"),
                                {"actor": actor.name, "project": project, "ids": derived}).fetchall()
        if len(rows) < len(derived):  # RLS refused one: never leave derived text behind a committed tombstone
            raise ScopeError(f"forget: actor {actor.name} may not forget the units derived from it")
        tombstoned |= {unit_id: tokens.token_of(number) for unit_id, number in rows}
        frontier = [unit_id for unit_id, _ in rows]
    return tombstoned


def retire_summaries_of(conn: psycopg.Connection[Any], unit: dict[str, Any], actor: str) -> None:
    """Retire, in a correction's transaction, the weekly summaries that copied the unit's replaced words (their
    clusters dropped, their members no longer pointing at them); each audited with the unit it was built from."""
    retired = [row[0] for row in conn.execute(query("lifecycle/retire_summaries_of"), {
        "project": unit["project"], "ids": [unit["id"]], "feed": V.FEED_CONSOLIDATION, "actor": actor})]
    if retired:
        conn.execute(query("lifecycle/drop_derived_clusters"), {"ids": retired})
    for summary in retired:
        audit.record(conn, actor, V.STATUS_RETIRED, project=unit["project"], unit_id=summary,
                     details={"corrected": str(unit["id"])})


def trust_of(confirms: int, flags: int) -> float:
    """Beta-style mean: starts at the default trust, rises with confirmations, falls with flags."""
    weight = V.TRUST_PRIOR_WEIGHT
    return (confirms + weight * V.DEFAULT_TRUST) / (confirms + flags + weight)


def vote(conn: psycopg.Connection[Any], project: str, token: str, task_id: str, value: int,
         actor: str = "api", persona: str | None = None) -> dict[str, Any]:
    """Record one vote per (unit, task) on a unit `persona` reads (a unit private to other personas is none to it);
    recount confirms and flags, recompute trust, flag past the threshold. With the kill switch on nothing is
    recorded: the token and "off"."""
    task_id = events.task_key(task_id)  # stored with the vote and audited: the grammar, and no credential
    actor = gates.identifier("actor", actor, required=True)
    events.event_id("actor", actor)  # audited too: never a credential
    persona = gates.identifier("persona", persona)
    project = gates.project_name(project)
    try:
        with events.write_transaction(conn, read_first=True):
            unit_id = tokens.unit_id_read_by(conn, project, token, persona)
            # votes of a unit serialise
            conn.execute("SELECT 1 FROM memory_units WHERE id = %s FOR UPDATE", (unit_id,))
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
    except events.SwitchedOff:
        return {"token": token, V.MEMORY_OFF: True}
    return {"token": token, "confirms": confirms, "flags": flags, "trust": round(trust, 4), "status": status}


def history(conn: psycopg.Connection[Any], project: str, token: str) -> list[dict[str, Any]]:
    """The supersession chain through a unit, oldest first, walked both ways."""
    unit_id = tokens.unit_id_of(conn, gates.project_name(project), token)
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(query("lifecycle/supersession_chain"), {"unit_id": unit_id}).fetchall()
