"""The write path: gated candidates captured in the inbox and folded into numbered units; corrections in place."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date
from typing import Any

import psycopg

from memory_assets import audit, gates, lifecycle, tokens
from memory_assets import vocabulary as V
from memory_assets.database import one, query
from memory_assets.errors import ValidationError
from memory_assets.ledger import canon, units

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RememberResult:
    """What happened to one candidate: its status, token and unit id, or the rejection reason."""

    status: str  # proposed | active | review | duplicate | rejected
    token: str | None = None
    unit_id: str | None = None
    reason: str | None = None


def record_rejection(conn: psycopg.Connection[Any], candidate: gates.Candidate, reason: str, count: int = 1) -> None:
    """Count a rejection per (project, feed, reason, day) and audit it with those counters only: no id of a
    rejected candidate (task, session, persona…) is stored or logged, since any of them may be what was rejected."""
    conn.execute(query("ledger/count_rejection"), {"project": candidate.project, "feed": candidate.feed,
                                                    "reason": reason, "count": count})
    audit.record(conn, candidate.feed, "reject", project=candidate.project, reason=reason,
                 details={"feed": candidate.feed, "count": count})
    log.info("rejected candidate project=%s feed=%s reason=%s", candidate.project, candidate.feed, reason)


def supersedes_token(value: object) -> str | None:
    """The token a new unit supersedes, checked before anything runs: ValidationError naming `supersedes`."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError("supersedes", f"must be a token like {V.TOKEN_PREFIX}<n>, got {type(value).__name__}")
    try:
        tokens.number_of(value)
    except ValidationError as error:
        raise ValidationError("supersedes", f"must be a token like {V.TOKEN_PREFIX}<n>") from error
    return value


def inbox_row(candidate: gates.Candidate) -> tuple[Any, ...]:
    """A candidate as a row of V.INBOX_COLUMNS."""
    values = {"idempotency_key": candidate.idempotency_key, "status": candidate.initial_status,
              "content_hash": candidate.content_hash, "paths": list(candidate.paths),
              "keywords": list(candidate.keywords)}
    return tuple(values[c] if c in values else getattr(candidate, c) for c in V.INBOX_COLUMNS)


def capture(conn: psycopg.Connection[Any], candidates: list[gates.Candidate]) -> int:
    """Append gated candidates to the inbox in one COPY-backed statement; replays (same idempotency key) are no-ops."""
    if not candidates:
        return 0
    columns = ", ".join(V.INBOX_COLUMNS)
    with conn.cursor() as cur:
        cur.execute(query("ledger/create_inbox_stage"))
        with cur.copy(f"COPY inbox_stage ({columns}) FROM STDIN") as copy:
            for candidate in candidates:
                copy.write_row(inbox_row(candidate))
        cur.execute(query("ledger/insert_staged"))
        inserted = cur.rowcount
        cur.execute("DELETE FROM inbox_stage")
    return inserted


def fold(conn: psycopg.Connection[Any], *, day: date | None = None, ids: list[int] | None = None) -> dict[str, int]:
    """Fold unfolded inbox rows of a day (or the given ids) into the ledger with set-based SQL; idempotent."""
    params: dict[str, Any] = {"day": day, "ids": ids, "trust": V.DEFAULT_TRUST}
    with conn.transaction():
        projects = [row[0] for row in conn.execute(query("ledger/inbox_scope"), params).fetchall()]
        if not projects:
            return {"inserted": 0, "linked": 0, "forgotten": 0, "projects": 0}
        params["projects"] = projects
        conn.execute(query("ledger/register_projects"), params)
        conn.execute(query("ledger/lock_projects"), params)
        inserted = conn.execute(query("ledger/fold_inbox"), params).rowcount
        linked = conn.execute(query("ledger/link_inbox"), params).rowcount
        buried = conn.execute(query("ledger/bury_inbox"), params).rowcount
    log.info("folded inbox day=%s projects=%d inserted=%d sources=%d forgotten=%d", day, len(projects), inserted,
             linked, buried)
    return {"inserted": inserted, "linked": linked, "forgotten": buried, "projects": len(projects)}


def remember(conn: psycopg.Connection[Any], candidate: gates.Candidate,
             supersedes: str | None = None) -> RememberResult:
    """The public write path for one candidate: gates, then inbox, then fold; rejected text is never stored.

    With `supersedes` (a token), the new unit replaces that one in the same transaction. The gates run before the
    transaction opens, so a slow gate never holds a lock.
    """
    supersedes = supersedes_token(supersedes)
    reason = gates.gate(candidate, canon.canon_of(conn, candidate.project))
    if reason:
        with conn.transaction():
            record_rejection(conn, candidate, reason)
        return RememberResult(status=V.OUTCOME_REJECTED, reason=reason)
    candidate = gates.without_source_text(candidate)
    with conn.transaction():
        old_id = superseded_id(conn, candidate.project, supersedes) if supersedes else None
        capture(conn, [candidate])
        inbox_id, folded_unit = one(conn.execute("SELECT id, unit_id FROM memory_inbox WHERE idempotency_key = %s",
                                                 (candidate.idempotency_key,)))
        if folded_unit is None:
            fold(conn, ids=[inbox_id])
        outcome, unit_id, number, status = one(conn.execute(query("ledger/remembered"), {"inbox_id": inbox_id}))
        if outcome == V.INBOX_FORGOTTEN:
            record_rejection(conn, candidate, V.REASON_FORGOTTEN)
            return RememberResult(status=V.OUTCOME_REJECTED, reason=V.REASON_FORGOTTEN)
        if old_id is not None:
            lifecycle.supersede(conn, unit_id, old_id, actor=candidate.persona or candidate.feed)
    replayed = folded_unit is not None
    status = V.OUTCOME_DUPLICATE if (outcome == V.INBOX_DUPLICATE or replayed) else status
    return RememberResult(status=status, token=tokens.token_of(number), unit_id=str(unit_id))


def superseded_id(conn: psycopg.Connection[Any], project: str, token: str) -> Any:
    """The id of the unit a new one supersedes; ValidationError naming `supersedes` when the project has none."""
    try:
        return tokens.unit_id_of(conn, project, token)
    except ValidationError as error:
        raise ValidationError("supersedes", f"no unit {token} in project {project}") from error


def remember_many(conn: psycopg.Connection[Any], candidates: list[gates.Candidate], *,
                  fold_now: bool = True) -> dict[str, Any]:
    """Bulk write path: gate every candidate first (outside any transaction, so no lock waits on a gate), then
    count the rejections, capture the rest in the inbox and fold them in one transaction."""
    canons: dict[str, list[list[int]]] = {}
    passed: list[gates.Candidate] = []
    rejections: list[tuple[gates.Candidate, str]] = []
    for candidate in candidates:
        if candidate.project not in canons:
            canons[candidate.project] = canon.canon_of(conn, candidate.project)
        reason = gates.gate(candidate, canons[candidate.project])
        if reason:
            rejections.append((candidate, reason))
        else:
            passed.append(gates.without_source_text(candidate))
    rejected: dict[str, int] = {}
    with conn.transaction():
        for candidate, reason in rejections:
            record_rejection(conn, candidate, reason)
            rejected[reason] = rejected.get(reason, 0) + 1
        captured = capture(conn, passed)
        folded = fold(conn, ids=inbox_ids(conn, passed)) if fold_now and passed else {"inserted": 0}
    return {"captured": captured, "inserted": folded["inserted"], "rejected": rejected}


def inbox_ids(conn: psycopg.Connection[Any], candidates: list[gates.Candidate]) -> list[int]:
    """The inbox ids of captured candidates, by idempotency key."""
    keys = [c.idempotency_key for c in candidates]
    return [row[0] for row in conn.execute("SELECT id FROM memory_inbox WHERE idempotency_key = ANY (%s)", (keys,))]


def correct(conn: psycopg.Connection[Any], project: str, token: str, *, title: str | None = None,
            body: str | None = None, keywords: list[str] | None = None, actor: str = "api") -> int:
    """Correct a unit's text in place (same fact, better words): gated again; the revision rises, old vectors die.
    A forgotten unit is refused: its tombstone never takes text again."""
    actor = gates.identifier("actor", actor, required=True)  # it is written to the unit and the audit log
    current = units.unit(conn, project, token)
    if current is None:
        raise ValidationError("token", f"no unit {token} in project {project}")
    if current["status"] == V.STATUS_FORGOTTEN:
        raise ValidationError("token", f"{token} is forgotten")
    candidate = gates.validate(project=project, kind=current["kind"], type=current["type"],
                               title=title if title is not None else current["title"],
                               body=body if body is not None else current["body"],
                               paths=current["paths"],
                               keywords=keywords if keywords is not None else current["keywords"])
    if gates.has_secret(gates.candidate_text(candidate)):
        raise ValidationError("body", "the correction contains a secret and was not stored")
    with conn.transaction():
        row = conn.execute(query("ledger/correct_unit"), {
            "title": candidate.title, "body": candidate.body, "keywords": list(candidate.keywords),
            "content_hash": candidate.content_hash, "actor": actor, "unit_id": current["id"]}).fetchone()
        if row is None:  # forgotten between the read and the update
            raise ValidationError("token", f"{token} is forgotten")
        revision: int = row[0]
        audit.record(conn, actor, "correct", project=project, unit_id=current["id"], details={"revision": revision})
    return revision
