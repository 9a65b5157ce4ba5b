"""Unit tokens (`mem-<n>`): how agents name and cite a unit of a project, and the unit id a token names."""

from __future__ import annotations

import re
from typing import Any

import psycopg

from memory_assets import vocabulary as V
from memory_assets.database import query
from memory_assets.errors import ValidationError

_TOKEN = re.compile(V.TOKEN_PATTERN)


def token_of(number: int) -> str:
    """The token of a unit number."""
    return f"{V.TOKEN_PREFIX}{number}"


def number_of(token: str) -> int:
    """The unit number of a `mem-<n>` token; ValidationError for anything else (never quoting it: a token field
    is where a careless caller pastes a credential)."""
    match = _TOKEN.match(token) if isinstance(token, str) else None
    if not match:
        raise ValidationError("token", f"must look like {V.TOKEN_PREFIX}<n>")
    return int(match.group(1))


def unit_id_of(conn: psycopg.Connection[Any], project: str, token: str) -> Any:
    """The id of `mem-<n>` in a project (a name its caller checked: the error names it); ValidationError when there
    is none."""
    return one_unit_id(conn, "ledger/unit_id", project, token, {})


def unit_id_read_by(conn: psycopg.Connection[Any], project: str, token: str, persona: str | None) -> Any:
    """The id of `mem-<n>` in a project as `persona` reads it (None: a reader naming no persona); ValidationError in
    unit_id_of's words when there is none, or only one private to other personas (no telling the two apart)."""
    return one_unit_id(conn, "ledger/unit_a_persona_reads", project, token, {"persona": persona})


def one_unit_id(conn: psycopg.Connection[Any], query_name: str, project: str, token: str,
                params: dict[str, Any]) -> Any:
    """The id a named query finds for a project's `mem-<n>`; ValidationError naming the token when it finds none."""
    row = conn.execute(query(query_name), {"project": project, "number": number_of(token), **params}).fetchone()
    if row is None:
        raise ValidationError("token", f"no unit {token} in project {project}")
    return row[0]
