"""Lifecycle transitions that keep history: supersession (never overwrite) and its chains."""

from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from memory_assets import authz, bundle, gates
from memory_assets import vocabulary as V


def supersede(conn: psycopg.Connection, new_id, old_id, actor: str = "api") -> None:
    """Make `new_id` replace `old_id`: the old row is closed (valid_until, superseded) and stays queryable as_of."""
    if str(new_id) == str(old_id):
        raise gates.ValidationError("supersedes", "a unit cannot supersede itself")
    chain = conn.execute(
        "WITH RECURSIVE back(id) AS (SELECT supersedes_id FROM memory_units WHERE id = %s "
        " UNION SELECT u.supersedes_id FROM memory_units u JOIN back ON u.id = back.id WHERE u.supersedes_id IS NOT NULL) "
        "SELECT 1 FROM back WHERE id = %s",
        (old_id, new_id),
    ).fetchone()
    if chain:
        raise gates.ValidationError("supersedes", "would create a supersession cycle")
    narrower = conn.execute(  # every reader of the old unit must be able to read its replacement
        "SELECT NOT (n.private_to IS NULL OR (o.private_to IS NOT NULL AND n.private_to @> o.private_to)) "
        "FROM memory_units n, memory_units o WHERE n.id = %s AND o.id = %s", (new_id, old_id)).fetchone()
    if narrower and narrower[0]:
        raise gates.ValidationError("supersedes", "a private unit cannot replace one that more readers see "
                                                  "(they would lose the fact)")
    row = conn.execute(
        "UPDATE memory_units SET status = 'superseded', valid_until = greatest(valid_from, now()), updated_by = %s "
        f"WHERE id = %s AND status IN {V.LIVE_STATUS_SQL} RETURNING project",
        (actor, old_id),
    ).fetchone()
    if row is None:
        raise gates.ValidationError("supersedes", "the superseded unit is not live")
    conn.execute("UPDATE memory_units SET supersedes_id = %s, updated_by = %s WHERE id = %s", (old_id, actor, new_id))
    conn.execute("INSERT INTO audit_log (actor, action, project, unit_id, details) VALUES (%s, 'supersede', %s, %s, %s)",
                 (actor, row[0], new_id, Jsonb({"supersedes": str(old_id)})))


class ScopeError(PermissionError):
    """The actor lacks the scope (read, write, forget) a request needs on a project."""


def forget(conn: psycopg.Connection, project: str, token: str, actor: authz.Actor, reason: str | None = None) -> str:
    """Tombstone a unit for good: text blanked wherever it was captured, vectors deleted, id/number/audit kept.

    Allowed only with the forget scope, which row-level security enforces on the tombstoning UPDATE.
    """
    from memory_assets import ledger

    if not actor.may("forget", project):
        raise ScopeError(f"forget: actor {actor.name} has no forget scope on project {project}")
    number = ledger.number_of(token)
    with conn.transaction():
        with authz.scoped(conn, actor):
            row = conn.execute(
                "UPDATE memory_units SET status = 'forgotten', title = '', body = '', paths = '{}', keywords = '{}', "
                "personas = '{}', valid_until = coalesce(valid_until, greatest(valid_from, now())), updated_by = %s "
                "WHERE project = %s AND number = %s AND status <> 'forgotten' RETURNING id",
                (actor.name, project, number),
            ).fetchone()
        if row is None:
            raise gates.ValidationError("token", f"no live unit {token} in project {project}")
        unit_id = row[0]
        # the trigger memory_units_forget_vectors deleted its vectors in this same transaction
        conn.execute("UPDATE memory_inbox SET title = '', body = '', paths = '{}', keywords = '{}' WHERE unit_id = %s",
                     (unit_id,))
        # past bundle revisions lose the unit too; the next revision is compiled without it
        conn.execute(
            "UPDATE memory_bundles SET units = units - 1, bundle = jsonb_set(bundle, '{units}', (SELECT "
            " coalesce(jsonb_agg(u ORDER BY n), '[]') FROM jsonb_array_elements(bundle->'units') WITH ORDINALITY "
            " AS e(u, n) WHERE u->>'id' <> %(token)s::text)) "
            "WHERE project = %(project)s AND bundle->'units' @> jsonb_build_array(jsonb_build_object('id', %(token)s::text))",
            {"project": project, "token": token})
        conn.execute("INSERT INTO audit_log (actor, action, project, unit_id, reason) VALUES (%s, 'forget', %s, %s, %s)",
                     (actor.name, project, unit_id, reason))
    bundle.compile_bundle(conn, project)
    return str(unit_id)


def trust_of(confirms: int, flags: int) -> float:
    """Beta-style mean: starts at the default trust, rises with confirmations, falls with flags."""
    weight = V.TRUST_PRIOR_WEIGHT
    return (confirms + weight * V.DEFAULT_TRUST) / (confirms + flags + weight)


VOTE = """
WITH cast_vote AS (
    INSERT INTO memory_votes (unit_id, project, task_id, vote, actor) VALUES (%(unit_id)s, %(project)s, %(task_id)s,
                                                                              %(vote)s, %(actor)s)
    ON CONFLICT (unit_id, task_id) DO UPDATE SET vote = EXCLUDED.vote, at = now()
    WHERE memory_votes.vote <> EXCLUDED.vote
    RETURNING 1
)
SELECT count(*) FROM cast_vote
"""


def vote(conn: psycopg.Connection, project: str, token: str, task_id: str, value: int, actor: str = "api") -> dict:
    """Record one vote per (unit, task); recount confirms and flags, recompute trust, flag past the threshold."""
    from memory_assets import ledger

    task_id = gates.text_field("task_id", task_id, V.ID_MAX_CHARS)
    with conn.transaction():
        unit_id = ledger.unit_id_of(conn, project, token)
        conn.execute("SELECT 1 FROM memory_units WHERE id = %s FOR UPDATE", (unit_id,))  # votes of a unit serialise
        changed = conn.execute(VOTE, {"unit_id": unit_id, "project": project, "task_id": task_id, "vote": value,
                                      "actor": actor}).fetchone()[0]
        confirms, flags = conn.execute(
            "SELECT count(*) FILTER (WHERE vote = 1), count(*) FILTER (WHERE vote = -1) FROM memory_votes "
            "WHERE unit_id = %s", (unit_id,)).fetchone()
        trust = trust_of(confirms, flags)
        status = conn.execute(
            "UPDATE memory_units SET confirms = %(c)s, flags = %(f)s, trust = %(t)s, "
            "last_confirmed_at = CASE WHEN %(v)s = 1 AND %(changed)s > 0 THEN now() ELSE last_confirmed_at END, "
            "status = CASE WHEN status = 'active' AND %(f)s >= %(threshold)s AND %(f)s > %(c)s THEN 'flagged' "
            "              ELSE status END "
            "WHERE id = %(id)s RETURNING status",
            {"c": confirms, "f": flags, "t": trust, "v": value, "changed": changed, "id": unit_id,
             "threshold": V.FLAG_THRESHOLD}).fetchone()[0]
        if changed:
            conn.execute("INSERT INTO audit_log (actor, action, project, unit_id, details) VALUES (%s, %s, %s, %s, %s)",
                         (actor, "confirm" if value > 0 else "flag", project, unit_id, Jsonb({"task_id": task_id})))
    return {"token": token, "confirms": confirms, "flags": flags, "trust": round(trust, 4), "status": status}


def history(conn: psycopg.Connection, project: str, token: str) -> list[dict]:
    """The supersession chain through a unit, oldest first, walked both ways."""
    from psycopg.rows import dict_row

    from memory_assets import ledger

    unit_id = ledger.unit_id_of(conn, project, token)
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            "WITH RECURSIVE back(id, depth) AS (SELECT %(id)s::uuid, 0 UNION "
            "  SELECT u.supersedes_id, b.depth - 1 FROM memory_units u JOIN back b ON u.id = b.id "
            "  WHERE u.supersedes_id IS NOT NULL), "
            "fwd(id, depth) AS (SELECT %(id)s::uuid, 0 UNION "
            "  SELECT u.id, f.depth + 1 FROM memory_units u JOIN fwd f ON u.supersedes_id = f.id) "
            f"SELECT {V.TOKEN_PREFIX_SQL} || u.number AS token, u.status, u.title, u.valid_from, u.valid_until "
            "FROM (SELECT * FROM back UNION SELECT * FROM fwd) c JOIN memory_units u ON u.id = c.id ORDER BY c.depth",
            {"id": unit_id}).fetchall()
