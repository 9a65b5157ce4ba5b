"""Who is asking: an actor's project scopes, enforced by row-level security in each request's transaction."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg

from memory_assets import vocabulary as V


@dataclass(frozen=True)
class Actor:
    """A caller and the projects it may read, write and forget in."""

    name: str
    read: tuple[str, ...] = field(default_factory=tuple)
    write: tuple[str, ...] = field(default_factory=tuple)
    forget: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def for_project(cls, project: str, name: str = "api", *, forget: bool = False) -> Actor:
        """An actor that may read and write one project (and forget in it when asked)."""
        return cls(name=name, read=(project,), write=(project,), forget=(project,) if forget else ())

    @classmethod
    def reader(cls, project: str, name: str | None = None) -> Actor:
        """An actor that may only read one project; its name is the persona whose private units it also sees."""
        return cls(name=name or "api", read=(project,))

    def may(self, scope: str, project: str) -> bool:
        return project in getattr(self, scope)


SCOPES = ("read", "write", "forget")
# the role switch and the scopes in one round trip: set_config('role', …, true) is SET LOCAL ROLE
SET_SCOPES = "SELECT set_config('role', %s, true), " + ", ".join(
    f"set_config('memory.{scope}', %s, true)" for scope in SCOPES)


@contextmanager
def scoped(conn: psycopg.Connection, actor: Actor) -> Iterator[psycopg.Connection]:
    """A transaction run as the non-owner role with the actor's scopes set locally: the database filters rows."""
    outermost = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    with conn.transaction():
        conn.execute(SET_SCOPES, [V.APP_ROLE, *(",".join(getattr(actor, scope)) for scope in SCOPES)])
        yield conn
        if not outermost:  # inside an outer transaction SET LOCAL would outlive this block: hand the role back
            conn.execute(SET_SCOPES, ["none", *("" for _ in SCOPES)])
