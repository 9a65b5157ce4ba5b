"""The write path and the ledger: capture gated candidates in the inbox, fold them into numbered units."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import date

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from memory_assets import gates
from memory_assets import vocabulary as V
from memory_assets.database import query

log = logging.getLogger(__name__)

INBOX_COLUMNS = (
    "idempotency_key", "project", "feed", "task_id", "session_id", "persona", "model", "observed_sha", "source_ref",
    "type", "kind", "title", "body", "paths", "keywords", "confidence", "importance", "status", "content_hash",
    "valid_from", "visibility",
)


@dataclass(frozen=True)
class RememberResult:
    """What happened to one candidate: its status, token and unit id, or the rejection reason."""

    status: str  # proposed | active | review | duplicate | rejected
    token: str | None = None
    unit_id: str | None = None
    reason: str | None = None


def token_of(number: int) -> str:
    return f"{V.TOKEN_PREFIX}{number}"


def number_of(token: str) -> int:
    """The unit number of a `mem-<n>` token; ValidationError for anything else."""
    match = re.match(V.TOKEN_PATTERN, token or "")
    if not match:
        raise gates.ValidationError("token", f"must look like mem-<n> (got {token!r})")
    return int(match.group(1))


def canon_of(conn: psycopg.Connection, project: str) -> list[list[int]]:
    """The project's registered canon chunks as token-hash sets."""
    rows = conn.execute("SELECT token_hashes FROM memory_canon WHERE project = %s", (project,)).fetchall()
    return [row[0] for row in rows]


def register_canon(conn: psycopg.Connection, project: str, path: str, text: str) -> int:
    """Register a canon document (README, ADR…) by path; only hashed token sets of its paragraphs are kept."""
    project = gates.project_name(project)
    chunks = [c for c in (p.strip() for p in text.split("\n\n")) if len(gates.word_tokens(c)) >= V.CANON_CHUNK_MIN_TOKENS]
    with conn.transaction():
        conn.execute("DELETE FROM memory_canon WHERE project = %s AND path = %s", (project, path))
        for i, chunk in enumerate(chunks):
            conn.execute(
                "INSERT INTO memory_canon (project, path, chunk, token_hashes) VALUES (%s, %s, %s, %s)",
                (project, path, i, gates.token_hashes(chunk)),
            )
    return len(chunks)


def record_rejection(conn: psycopg.Connection, candidate: gates.Candidate, reason: str, count: int = 1) -> None:
    """Count a rejection per (project, feed, reason, day) and audit it with ids and the reason only."""
    conn.execute(
        "INSERT INTO memory_rejections (project, feed, reason, day, count) VALUES (%s, %s, %s, current_date, %s) "
        "ON CONFLICT (project, feed, reason, day) DO UPDATE SET count = memory_rejections.count + EXCLUDED.count",
        (candidate.project, candidate.feed, reason, count),
    )
    conn.execute(
        "INSERT INTO audit_log (actor, action, project, reason, details) VALUES (%s, 'reject', %s, %s, %s)",
        (candidate.persona or candidate.feed, candidate.project, reason,
         Jsonb({"feed": candidate.feed, "task_id": candidate.task_id, "session_id": candidate.session_id})),
    )
    log.info("rejected candidate project=%s feed=%s task=%s reason=%s",
             candidate.project, candidate.feed, candidate.task_id, reason)


def inbox_row(candidate: gates.Candidate) -> tuple:
    return (
        candidate.idempotency_key, candidate.project, candidate.feed, candidate.task_id, candidate.session_id,
        candidate.persona, candidate.model, candidate.observed_sha, candidate.source_ref, candidate.type,
        candidate.kind, candidate.title, candidate.body, list(candidate.paths), list(candidate.keywords),
        candidate.confidence, candidate.importance, candidate.initial_status, candidate.content_hash,
        candidate.valid_from, candidate.visibility,
    )


def capture(conn: psycopg.Connection, candidates: list[gates.Candidate]) -> int:
    """Append gated candidates to the inbox in one COPY-backed statement; replays (same idempotency key) are no-ops."""
    if not candidates:
        return 0
    columns = ", ".join(INBOX_COLUMNS)
    with conn.cursor() as cur:
        cur.execute("CREATE TEMP TABLE IF NOT EXISTS inbox_stage (LIKE memory_inbox INCLUDING DEFAULTS) ON COMMIT DELETE ROWS")
        with cur.copy(f"COPY inbox_stage ({columns}) FROM STDIN") as copy:
            for candidate in candidates:
                copy.write_row(inbox_row(candidate))
        cur.execute(
            f"INSERT INTO memory_inbox ({columns}) SELECT {columns} FROM inbox_stage ORDER BY id "
            "ON CONFLICT (idempotency_key) DO NOTHING"
        )
        inserted = cur.rowcount
        cur.execute("DELETE FROM inbox_stage")
    return inserted


def fold(conn: psycopg.Connection, *, day: date | None = None, ids: list[int] | None = None) -> dict:
    """Fold unfolded inbox rows of a day (or the given ids) into the ledger with set-based SQL; idempotent."""
    params = {"day": day, "ids": ids, "trust": V.DEFAULT_TRUST}
    with conn.transaction():
        projects = [row[0] for row in conn.execute(query("inbox_scope"), params).fetchall()]
        if not projects:
            return {"inserted": 0, "linked": 0, "projects": 0}
        conn.execute(
            "INSERT INTO memory_projects (project) SELECT unnest(%s::text[]) ON CONFLICT (project) DO NOTHING",
            (projects,),
        )
        conn.execute("SELECT project FROM memory_projects WHERE project = ANY (%s) ORDER BY project FOR UPDATE",
                     (projects,))
        params["projects"] = projects
        inserted = conn.execute(query("fold_inbox"), params).rowcount
        linked = conn.execute(query("link_inbox"), params).rowcount
        buried = conn.execute(query("bury_inbox"), params).rowcount
    log.info("folded inbox day=%s projects=%d inserted=%d sources=%d forgotten=%d", day, len(projects), inserted,
             linked, buried)
    return {"inserted": inserted, "linked": linked, "forgotten": buried, "projects": len(projects)}


def remember(conn: psycopg.Connection, candidate: gates.Candidate, supersedes: str | None = None) -> RememberResult:
    """The public write path for one candidate: gates, then inbox, then fold; rejected text is never stored.

    With `supersedes` (a token), the new unit replaces that one in the same transaction.
    """
    reason = gates.gate(candidate, canon_of(conn, candidate.project))
    if reason:
        with conn.transaction():
            record_rejection(conn, candidate, reason)
        return RememberResult(status=V.OUTCOME_REJECTED, reason=reason)
    candidate = gates.without_source_text(candidate)
    with conn.transaction():
        old_id = unit_id_of(conn, candidate.project, supersedes) if supersedes else None
        capture(conn, [candidate])
        inbox_id, folded_unit = conn.execute(
            "SELECT id, unit_id FROM memory_inbox WHERE idempotency_key = %s", (candidate.idempotency_key,)
        ).fetchone()
        if folded_unit is None:
            fold(conn, ids=[inbox_id])
        row = conn.execute(
            "SELECT i.outcome, i.unit_id, u.number, u.status FROM memory_inbox i JOIN memory_units u ON u.id = i.unit_id "
            "WHERE i.id = %s",
            (inbox_id,),
        ).fetchone()
        outcome, unit_id, number, status = row
        if outcome == "forgotten":
            record_rejection(conn, candidate, V.REASON_FORGOTTEN)
            return RememberResult(status=V.OUTCOME_REJECTED, reason=V.REASON_FORGOTTEN)
        if old_id is not None:
            from memory_assets import lifecycle

            lifecycle.supersede(conn, unit_id, old_id, actor=candidate.persona or candidate.feed)
    replayed = folded_unit is not None
    status = V.OUTCOME_DUPLICATE if (outcome == "duplicate" or replayed) else status
    return RememberResult(status=status, token=token_of(number), unit_id=str(unit_id))


def unit(conn: psycopg.Connection, project: str, token: str) -> dict | None:
    """One unit by project and token, with its sources; None when there is no such unit."""
    number = number_of(token)
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(query("unit_by_token"), {"project": project, "number": number}).fetchone()
        if row is None:
            return None
        row["token"] = token_of(row["number"])
        row["sources"] = cur.execute(
            "SELECT feed, task_id, session_id, persona, model, observed_sha, source_ref, visibility, created_at "
            "FROM memory_sources WHERE unit_id = %s ORDER BY id",
            (row["id"],),
        ).fetchall()
    return row


def stats(conn: psycopg.Connection, project: str | None = None) -> dict:
    """Units by status and kind, and rejections by reason, for one project or all."""
    units = conn.execute(
        "SELECT status, kind, count(*) FROM memory_units WHERE %(p)s::text IS NULL OR project = %(p)s "
        "GROUP BY status, kind",
        {"p": project},
    ).fetchall()
    rejections = conn.execute(
        "SELECT reason, sum(count)::bigint FROM memory_rejections WHERE %(p)s::text IS NULL OR project = %(p)s "
        "GROUP BY reason",
        {"p": project},
    ).fetchall()
    return _summary(units, rejections)


def _summary(units: list[tuple], rejections: list[tuple]) -> dict:
    by_status: dict[str, int] = {}
    by_kind: dict[str, int] = {}
    for status, kind, count in units:
        by_status[status] = by_status.get(status, 0) + count
        by_kind[kind] = by_kind.get(kind, 0) + count
    return {
        "units_by_status": dict(sorted(by_status.items())),
        "units_by_kind": dict(sorted(by_kind.items())),
        "rejections_by_reason": {reason: int(count) for reason, count in sorted(rejections)},
    }


def day_summary(conn: psycopg.Connection, first: date, last: date) -> dict:
    """Units created and rejections counted between two UTC days (inclusive), by status, kind and reason."""
    units = conn.execute(
        "SELECT status, kind, count(*) FROM memory_units "
        "WHERE (created_at AT TIME ZONE 'UTC')::date BETWEEN %s AND %s GROUP BY status, kind",
        (first, last),
    ).fetchall()
    rejections = conn.execute(
        "SELECT reason, sum(count)::bigint FROM memory_rejections WHERE day BETWEEN %s AND %s GROUP BY reason",
        (first, last),
    ).fetchall()
    return _summary(units, rejections)


def unfolded_days(conn: psycopg.Connection) -> list[tuple[date, int]]:
    """Days with inbox rows not yet folded, each with its newest inbox id (a run key that changes with new rows)."""
    return conn.execute(
        "SELECT (received_at AT TIME ZONE 'UTC')::date AS day, max(id) FROM memory_inbox "
        "WHERE unit_id IS NULL GROUP BY 1 ORDER BY 1"
    ).fetchall()


def remember_many(conn: psycopg.Connection, candidates: list[gates.Candidate], *, fold_now: bool = True) -> dict:
    """Bulk write path: gate every candidate, count rejections, capture the rest in the inbox and fold them."""
    canon: dict[str, list[list[int]]] = {}
    passed: list[gates.Candidate] = []
    rejected: dict[str, int] = {}
    with conn.transaction():
        for candidate in candidates:
            if candidate.project not in canon:
                canon[candidate.project] = canon_of(conn, candidate.project)
            reason = gates.gate(candidate, canon[candidate.project])
            if reason:
                record_rejection(conn, candidate, reason)
                rejected[reason] = rejected.get(reason, 0) + 1
            else:
                passed.append(gates.without_source_text(candidate))
        captured = capture(conn, passed)
        folded = fold(conn, ids=_inbox_ids(conn, passed)) if fold_now and passed else {"inserted": 0}
    return {"captured": captured, "inserted": folded["inserted"], "rejected": rejected}



def _inbox_ids(conn: psycopg.Connection, candidates: list[gates.Candidate]) -> list[int]:
    keys = [c.idempotency_key for c in candidates]
    return [row[0] for row in conn.execute("SELECT id FROM memory_inbox WHERE idempotency_key = ANY (%s)", (keys,))]


def unit_id_of(conn: psycopg.Connection, project: str, token: str) -> str:
    """The id of `mem-<n>` in a project; ValidationError when there is none."""
    row = conn.execute("SELECT id FROM memory_units WHERE project = %s AND number = %s",
                       (project, number_of(token))).fetchone()
    if row is None:
        raise gates.ValidationError("token", f"no unit {token} in project {project}")
    return row[0]


def correct(conn: psycopg.Connection, project: str, token: str, *, title: str | None = None,
            body: str | None = None, keywords: list[str] | None = None, actor: str = "api") -> int:
    """Correct a unit's text in place (same fact, better words): gated again; the revision rises, old vectors die."""
    current = unit(conn, project, token)
    if current is None:
        raise gates.ValidationError("token", f"no unit {token} in project {project}")
    candidate = gates.validate(project=project, kind=current["kind"], type=current["type"],
                               title=title if title is not None else current["title"],
                               body=body if body is not None else current["body"],
                               paths=current["paths"], keywords=keywords if keywords is not None else current["keywords"])
    if gates.has_secret(gates.candidate_text(candidate)):
        raise gates.ValidationError("body", "the correction contains a secret and was not stored")
    with conn.transaction():
        revision = conn.execute(
            "UPDATE memory_units SET title = %s, body = %s, keywords = %s, content_hash = %s, updated_by = %s "
            "WHERE id = %s RETURNING revision",
            (candidate.title, candidate.body, list(candidate.keywords), candidate.content_hash, actor, current["id"]),
        ).fetchone()[0]
        conn.execute("INSERT INTO audit_log (actor, action, project, unit_id, details) VALUES (%s, 'correct', %s, %s, %s)",
                     (actor, project, current["id"], Jsonb({"revision": revision})))
    return revision
