"""Reading the ledger: one unit by token, unit ids, counts by status, kind and reason, projects and pending days."""

from __future__ import annotations

from datetime import date
from typing import Any

import psycopg
from psycopg.rows import dict_row

from memory_assets import gates, tokens
from memory_assets import vocabulary as V
from memory_assets.database import query


def unit(conn: psycopg.Connection[Any], project: str, token: str) -> dict[str, Any] | None:
    """One unit by project and token, with its sources; None when there is no such unit (under authz.scoped: none
    the actor may see, and only the sources it may see); a project name validate would refuse (a credential pasted
    as one) is a ValidationError, never quoted back."""
    row = unit_row(conn, project, token)
    if row is not None:
        with conn.cursor(row_factory=dict_row) as cur:
            row["sources"] = cur.execute(query("ledger/unit_sources"), {"unit_id": row["id"]}).fetchall()
    return row


def unit_row(conn: psycopg.Connection[Any], project: str, token: str) -> dict[str, Any] | None:
    """One unit's own row by project and token, as `unit` reads it but without its sources (a correction needs
    none)."""
    project = gates.project_name(project)
    number = tokens.number_of(token)
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(query("ledger/unit_by_token"), {"project": project, "number": number}).fetchone()
    if row is not None:
        row["token"] = tokens.token_of(row["number"])
    return row


def projects(conn: psycopg.Connection[Any]) -> list[str]:
    """Every project's name (the owner reads them): whom a summary over all projects is scoped to."""
    return [row[0] for row in conn.execute("SELECT project FROM memory_projects ORDER BY project")]


def stats(conn: psycopg.Connection[Any], project: str | None = None) -> dict[str, Any]:
    """Units by status and kind, and rejections by reason, for one project or all."""
    units = conn.execute(query("ledger/units_by_status_kind"), {"project": project}).fetchall()
    rejections = conn.execute(query("ledger/rejections_by_reason"), {"project": project}).fetchall()
    return summary(units, rejections)


def day_summary(conn: psycopg.Connection[Any], first: date, last: date) -> dict[str, Any]:
    """Units created and rejections counted between two UTC days (inclusive), by status, kind and reason."""
    days = {"first": first, "last": last}
    units = conn.execute(query("ledger/day_units_by_status_kind"), days).fetchall()
    rejections = conn.execute(query("ledger/day_rejections_by_reason"), days).fetchall()
    return summary(units, rejections)


def summary(units: list[tuple[Any, ...]], rejections: list[tuple[Any, ...]]) -> dict[str, Any]:
    """(status, kind, count) and (reason, count) rows as the counts the API, CLI and asset metadata show."""
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


def unfolded_days(conn: psycopg.Connection[Any]) -> list[tuple[date, int]]:
    """Days with inbox rows left unfolded past V.INBOX_FOLD_GRACE_SECONDS, each with its newest inbox id (a run key
    that changes with new rows)."""
    rows = conn.execute(query("ledger/unfolded_days"), {"grace": V.INBOX_FOLD_GRACE_SECONDS}).fetchall()
    return [(day, newest) for day, newest in rows]


def project_changes(conn: psycopg.Connection[Any]) -> list[tuple[str, int]]:
    """Every project with its latest unit-change sequence: project discovery for the sensor and `materialize`."""
    return [(project, seq) for project, seq in conn.execute(query("ledger/project_changes")).fetchall()]
