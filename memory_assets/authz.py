"""Who is asking: an actor's project scopes and persona, enforced by row-level security in each request's
transaction."""

from __future__ import annotations

import os
import re
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

import psycopg

from memory_assets import gates
from memory_assets import vocabulary as V
from memory_assets.errors import ScopeError, ValidationError


@dataclass(frozen=True)
class Actor:
    """A caller (its name is the persona whose private units it sees) and the projects it may read, write and
    forget in; the empty name is a reader that names no persona and sees no private unit."""

    name: str = V.NO_PERSONA
    read: tuple[str, ...] = field(default_factory=tuple)
    write: tuple[str, ...] = field(default_factory=tuple)
    forget: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def for_project(cls, project: str, name: str = V.NO_PERSONA, *, forget: bool = False) -> Actor:
        """An actor that may read and write one project (and forget in it when in-process code asks; the CLI and
        the MCP server grant forget only through `operator`)."""
        return cls(name=name, read=(project,), write=(project,), forget=(project,) if forget else ())

    @classmethod
    def reader(cls, project: str, persona: str | None = None) -> Actor:
        """An actor that may only read one project; its persona (if any) is whose private units it also sees."""
        return cls(name=persona or V.NO_PERSONA, read=(project,))

    @classmethod
    def readers(cls, projects: tuple[str, ...], persona: str | None = None) -> Actor:
        """An actor that may only read the given projects (a summary over several)."""
        return cls(name=persona or V.NO_PERSONA, read=projects)

    @classmethod
    def operator(cls, project: str, name: str) -> Actor:
        """An operator of one project (read, write, forget): only a name the deployment lists in
        MEMORY_ASSETS_OPERATORS, so forgetting is never a flag a caller sets on itself."""
        require_operator(name)
        return cls(name=name, read=(project,), write=(project,), forget=(project,))

    def may(self, scope: str, project: str) -> bool:
        return project in getattr(self, scope)


def operators() -> frozenset[str]:
    """The operator names the deployment configured (MEMORY_ASSETS_OPERATORS, comma-separated), read at each call."""
    return frozenset(name.strip() for name in os.environ.get(V.OPERATORS_ENV, "").split(",") if name.strip())


def require_operator(name: str | None) -> str:
    """The name when the deployment lists it as an operator; ScopeError naming the setting otherwise."""
    allowed = operators()
    if not name or name not in allowed:
        where = "it is not set" if not allowed else f"{gates.shown(name)} is not listed"
        raise ScopeError(f"forget: needs an operator named in {V.OPERATORS_ENV} ({where})")
    return name


SCOPES = ("read", "write", "forget")
# the role switch, the scopes and the persona in one round trip: set_config('role', …, true) is SET LOCAL ROLE
SET_SCOPES = ("SELECT set_config('role', %s, true), "
              + ", ".join(f"set_config('memory.{scope}', %s, true)" for scope in SCOPES)
              + ", set_config('memory.persona', %s, true)")


_PROJECT = re.compile(V.PROJECT_PATTERN)
_ID = re.compile(V.ID_PATTERN)


def check_actor(actor: Actor) -> None:
    """ValidationError naming `persona` or `project` when an actor's name or projects break their grammar, so no
    read path sends a NUL byte, a control character or an overlong name to the database."""
    if actor.name and not (isinstance(actor.name, str) and len(actor.name) <= V.ID_MAX_CHARS
                           and _ID.fullmatch(actor.name)):
        raise ValidationError("persona", V.ID_RULE)
    for scope in SCOPES:
        for project in getattr(actor, scope):
            if not (isinstance(project, str) and len(project) <= V.PROJECT_MAX_CHARS and _PROJECT.fullmatch(project)):
                raise ValidationError("project", "letters, digits, '.', '_' and '-' only, starting with a letter or "
                                                 f"digit, at most {V.PROJECT_MAX_CHARS} characters")


# the scopes open on each connection, innermost last: one open means a transaction is, whatever libpq says (IDLE
# inside a pipelined transaction until its next sync)
_OPEN_SCOPES: weakref.WeakKeyDictionary[psycopg.Connection, list[list[str]]] = weakref.WeakKeyDictionary()


@contextmanager
def scoped(conn: psycopg.Connection, actor: Actor, *, one_snapshot: bool = False) -> Iterator[psycopg.Connection]:
    """A transaction run as the non-owner role with the actor's scopes and persona set locally: the database
    filters the rows (other projects, other personas' private units and sources). `one_snapshot`: every statement
    reads the same snapshot (REPEATABLE READ, for a read whose statements must agree; an outer transaction keeps
    its own)."""
    check_actor(actor)
    opened = _OPEN_SCOPES.setdefault(conn, [])
    outermost = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE and not opened
    pipelined = conn.pgconn.pipeline_status != psycopg.pq.PipelineStatus.OFF
    repeatable = one_snapshot and outermost
    begins_here = outermost and pipelined and conn.autocommit  # its BEGIN names the isolation level: one statement
    with (pipelined_transaction(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ" if repeatable else "BEGIN")
          if begins_here else pipelined_savepoint(conn, f"memory_scope_{len(opened)}") if opened and pipelined
          else conn.transaction()):  # a nested block's error rolls back to its savepoint, its SET LOCAL with it
        if repeatable and not begins_here:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        settings = [V.APP_ROLE, *(",".join(getattr(actor, scope)) for scope in SCOPES), actor.name]
        conn.execute(SET_SCOPES, settings)
        try:
            opened.append(settings)
            yield conn
        finally:
            opened[:] = [other for other in opened if other is not settings]
        if not outermost:  # inside an outer transaction SET LOCAL would outlive this block: the enclosing scope's
            # settings back (the owner's role would read every project for the rest of it), or none
            conn.execute(SET_SCOPES, opened[-1] if opened else ["none", *("" for _ in SCOPES), V.NO_PERSONA])


@contextmanager
def pipelined_transaction(conn: psycopg.Connection, begin: str = "BEGIN") -> Iterator[None]:
    """A transaction whose BEGIN (`begin`, which may name its isolation level) and COMMIT travel with the statements
    next to them, on an autocommit connection in pipeline mode: psycopg's transaction() waits for the server after
    BEGIN and before COMMIT (two round trips of a recall's five). On an error it rolls back, as transaction() does."""
    with _pipelined_block(conn, begin, "COMMIT", "ROLLBACK"):
        yield


@contextmanager
def pipelined_savepoint(conn: psycopg.Connection, name: str) -> Iterator[None]:
    """A savepoint inside a transaction in pipeline mode, its statements travelling with the others (psycopg's
    transaction() cannot tell a pipelined transaction is open): an error inside rolls back to it."""
    with _pipelined_block(conn, f"SAVEPOINT {name}", f"RELEASE SAVEPOINT {name}", f"ROLLBACK TO SAVEPOINT {name}"):
        yield


@contextmanager
def _pipelined_block(conn: psycopg.Connection, begin: str, end: str, undo: str) -> Iterator[None]:
    conn.execute(begin)
    try:
        yield
    except BaseException:
        with suppress(psycopg.Error), conn.pipeline() as pipeline:
            pipeline.sync()  # ends a segment an error aborted: libpq would skip the undo queued in it
        with suppress(psycopg.Error):
            conn.execute(undo)
        raise
    conn.execute(end)
