"""Canon documents (README, ADRs…) kept as hashed token sets, so candidates that restate them are rejected."""

from __future__ import annotations

from typing import Any

import psycopg

from memory_assets import gates
from memory_assets import vocabulary as V
from memory_assets.database import query


def canon_of(conn: psycopg.Connection[Any], project: str) -> list[list[int]]:
    """The project's registered canon chunks as token-hash sets."""
    rows = conn.execute("SELECT token_hashes FROM memory_canon WHERE project = %s", (project,)).fetchall()
    return [row[0] for row in rows]


def write_context(conn: psycopg.Connection[Any], project: str) -> tuple[bool, list[list[int]]]:
    """Whether the kill switch is on and the project's canon chunks, read in one round trip before a write."""
    rows = conn.execute(query("ledger/write_context"), {"project": project}, prepare=True).fetchall()
    return rows[0][0], [row[1] for row in rows if row[1] is not None]


def register_canon(conn: psycopg.Connection[Any], project: str, path: str, text: str) -> int:
    """Register a canon document by path; only hashed token sets of its paragraphs are kept."""
    project = gates.project_name(project)
    chunks = [c for c in (p.strip() for p in text.split("\n\n"))
              if len(gates.word_tokens(c)) >= V.CANON_CHUNK_MIN_TOKENS]
    with conn.transaction():
        conn.execute("DELETE FROM memory_canon WHERE project = %s AND path = %s", (project, path))
        for i, chunk in enumerate(chunks):
            conn.execute("INSERT INTO memory_canon (project, path, chunk, token_hashes) VALUES (%s, %s, %s, %s)",
                         (project, path, i, gates.token_hashes(chunk)))
    return len(chunks)
