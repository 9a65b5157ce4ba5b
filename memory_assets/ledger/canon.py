"""Canon documents (README, ADRs…) kept as hashed token sets, so candidates that restate them are rejected."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg

from memory_assets import gates
from memory_assets import vocabulary as V
from memory_assets.database import query
from memory_assets.errors import ValidationError


def canon_of(conn: psycopg.Connection[Any], project: str) -> list[list[int]]:
    """The project's registered canon chunks as token-hash sets."""
    rows = conn.execute("SELECT token_hashes FROM memory_canon WHERE project = %s", (project,)).fetchall()
    return [row[0] for row in rows]


@dataclass(frozen=True)
class Canon:
    """A project's canon chunks as the gates read them, with the version (None: no canon yet) that a write sends so
    the server can tell whether they are still the project's."""

    version: UUID | None
    chunks: list[list[int]]


def write_context(conn: psycopg.Connection[Any], project: str) -> tuple[bool, Canon]:
    """Whether the kill switch is on and the project's canon with its version, read in one round trip."""
    rows = conn.execute(query("ledger/write_context"), {"project": project}, prepare=True).fetchall()
    return rows[0][0], Canon(rows[0][1], [row[2] for row in rows if row[2] is not None])


class Canons:
    """The canon of each project a process wrote to lately (at most V.CANON_PROJECTS_KEPT), so that remember() reads
    nothing before its write: the write sends the version, and the server writes nothing if it changed since."""

    def __init__(self, size: int = V.CANON_PROJECTS_KEPT) -> None:
        """An empty store that keeps up to `size` projects, the one kept longest ago dropped first."""
        self.size = size
        self._kept: dict[str, Canon] = {}
        self._lock = threading.Lock()

    def known(self, project: str) -> Canon | None:
        """The project's canon as last read, or None."""
        return self._kept.get(project)

    def drop(self, project: str) -> None:
        """Forget a project's canon: the server said it changed."""
        with self._lock:
            self._kept.pop(project, None)

    def keep(self, project: str, canon: Canon) -> None:
        """Keep a project's canon as just read."""
        with self._lock:
            self._kept.pop(project, None)
            self._kept[project] = canon
            while len(self._kept) > self.size:
                del self._kept[next(iter(self._kept))]


def register_canon(conn: psycopg.Connection[Any], project: str, path: str, text: str) -> int:
    """Register a canon document by path; only hashed token sets of its paragraphs are kept. Its path is a path as a
    unit's is, and its size bounded (every later write of the project is compared with each paragraph)."""
    project = gates.project_name(project)
    path = gates.no_credential("path", gates.text_field("path", path, V.ITEM_MAX_CHARS))
    text = gates.text_field("text", text, V.CANON_TEXT_MAX_CHARS, rule="any")
    chunks = [c for c in (p.strip() for p in text.split("\n\n"))
              if len(gates.word_tokens(c)) >= V.CANON_CHUNK_MIN_TOKENS]
    if len(chunks) > V.CANON_MAX_CHUNKS:
        raise ValidationError("text", f"at most {V.CANON_MAX_CHUNKS} paragraphs of {V.CANON_CHUNK_MIN_TOKENS} words "
                                      f"or more (got {len(chunks)})")
    with conn.transaction(), conn.cursor() as cur:
        cur.execute("DELETE FROM memory_canon WHERE project = %s AND path = %s", (project, path))
        cur.executemany("INSERT INTO memory_canon (project, path, chunk, token_hashes) VALUES (%s, %s, %s, %s)",
                        [(project, path, i, gates.token_hashes(chunk)) for i, chunk in enumerate(chunks)])
    return len(chunks)
