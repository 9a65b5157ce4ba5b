"""Usage events (injected, read, cited, followed) and the memory switch that decides which tasks get memory."""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from memory_assets import database, gates, tokens
from memory_assets import vocabulary as V
from memory_assets.database import one, query
from memory_assets.errors import ValidationError


def event_id(field_name: str, value: object) -> str | None:
    """An optional epic, session or channel id in the identifier grammar and no credential: it is stored with the
    event or the task's arm, so it gets the same check as a unit's provenance."""
    text = gates.identifier(field_name, value)
    return None if text is None else gates.no_credential(field_name, text)


def task_key(value: object) -> str:
    """A task id, required, checked as `event_id` checks the optional ones."""
    return gates.no_credential("task_id", gates.identifier("task_id", value, required=True))


def record_events(conn: psycopg.Connection[Any], project: str, task_id: str, events: list[dict[str, Any]],
                  persona: str | None = None) -> int:
    """Record events [{token, kind, channel?, provisional?, session_id?}]: one row per (task, unit, kind), only for
    units `persona` reads (None: a reader naming no persona) and none under the kill switch."""
    try:
        return recorded_events(conn, project, task_id, events, persona)
    except SwitchedOff:
        return 0


def recorded_events(conn: psycopg.Connection[Any], project: str, task_id: str, events: list[dict[str, Any]],
                    persona: str | None) -> int:
    """record_events' work, in one transaction: the events recorded, or SwitchedOff where the kill switch went on
    before its commit (nothing recorded), which a caller tells apart from a repeat (0)."""
    project = gates.project_name(project)
    task_id = task_key(task_id)
    persona = gates.identifier("persona", persona)
    recorded = 0
    with conn.transaction():
        for event in events:
            gates.one_of("kind", event.get("kind"), V.EVENT_KINDS)
            recorded += conn.execute(query("events/record_event"), {
                "task_id": task_id, "kind": event["kind"], "channel": event_id("channel", event.get("channel")),
                "session_id": event_id("session_id", event.get("session_id")),
                "provisional": bool(event.get("provisional", False)),
                "project": project, "number": tokens.number_of(event.get("token", "")), "persona": persona,
            }).rowcount
        if recorded:  # not write_transaction: a repeat, which records nothing, saves the read
            stored_unless_killed(conn)
    return recorded


def cite_from_text(conn: psycopg.Connection[Any], project: str, task_id: str, text: str,
                   persona: str | None = None) -> list[str]:
    """Find mem-<n> tokens in an agent's output and record `cited` events for units of this project that `persona`
    reads only; none under the kill switch."""
    project = gates.project_name(project)
    task_key(task_id)  # checked before the lookup, so a bad id is refused even when nothing is cited
    persona = gates.identifier("persona", persona)
    if text is not None and not isinstance(text, str):
        raise ValidationError("text", f"must be a string, got {type(text).__name__}")
    if text is not None and len(text) > V.CITE_TEXT_MAX_CHARS:
        raise ValidationError("text", f"at most {V.CITE_TEXT_MAX_CHARS} characters (got {len(text)})")
    numbers = list(dict.fromkeys(int(n.group(1)) for n in re.finditer(V.CITATION_PATTERN, text or "")))
    if len(numbers) > V.CITE_MAX_TOKENS:
        raise ValidationError("text", f"cites at most {V.CITE_MAX_TOKENS} distinct tokens (got {len(numbers)})")
    if not numbers:  # nothing cited: no lookup (ledger/insert_staged.sql says why an empty list must not be sent)
        return []
    existing = {r[0] for r in conn.execute(query("events/cited_numbers"), {
        "project": project, "numbers": numbers, "persona": persona}).fetchall()}
    cited = [tokens.token_of(n) for n in numbers if n in existing]
    if cited:  # tokens of other projects or none: no events, no empty transaction
        try:
            recorded_events(conn, project, task_id, [{"token": t, "kind": "cited", "channel": "text"} for t in cited],
                            persona)
        except SwitchedOff:  # the switch went on as the citations were recorded: none was
            return []
    return cited


# --- The memory switch ----------------------------------------------------------------------

SWITCH_SCOPES = ("task", "epic", "system", "kill", "holdout")
SWITCH_SCOPES_WITHOUT_KEY = ("system", "kill", "holdout")  # one setting each, under the key ""


def set_switch(conn: psycopg.Connection[Any], scope: str, key: str, value: str) -> None:
    """Set memory on/off for a task, an epic or the system, the kill switch (on = kill), or the holdout %."""
    gates.one_of("scope", scope, SWITCH_SCOPES)
    if scope in SWITCH_SCOPES_WITHOUT_KEY and key != "":
        raise ValidationError("key", f"must be empty for scope {scope} (got {gates.shown(key)})")
    if scope == "kill" and (not conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE):
        raise RuntimeError("the kill switch is set on an autocommit connection outside any transaction: its drain "
                           "must follow the switch's commit")
    if scope == "holdout":
        holdout_percent(value)
    elif value not in V.SWITCH_VALUES:
        raise ValidationError("value", f"must be on or off (got {gates.shown(value)})")
    conn.execute(query("events/set_switch"), {"scope": scope, "key": key, "value": str(value)})
    if scope == "kill" and value == "on":
        drain_writes(conn)


def drain_writes(conn: psycopg.Connection[Any]) -> None:
    """Wait for every write that read the kill switch as off to end (each holds the switch's lock shared to its
    commit), so that once the switch is on and this returns nothing more is stored; a write that begins meanwhile
    finds the lock asked for and stores nothing. A write still running after KILL_SWITCH_DRAIN_MS raises
    TimeoutError."""
    try:
        with conn.transaction():
            database.bound_lock_wait(conn, V.KILL_SWITCH_DRAIN_MS)
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", V.KILL_SWITCH_LOCK)
    except psycopg.errors.LockNotAvailable:
        raise TimeoutError(f"the kill switch is on, but writes that began before it (or a session holding its lock "
                           f"by hand) were still running after {V.KILL_SWITCH_DRAIN_MS} ms: they may still "
                           f"commit") from None


def holdout_percent(value: object) -> float:
    """A holdout share as a number in 0..HOLDOUT_MAX_PERCENT: more would hold most tasks out of memory."""
    try:
        percent = float(str(value))
    except ValueError:
        raise ValidationError("holdout", f"must be a percentage (got {gates.shown(value)})") from None
    if not 0 <= percent <= V.HOLDOUT_MAX_PERCENT:  # NaN fails both comparisons
        raise ValidationError("holdout",
                              f"a percentage between 0 and {V.HOLDOUT_MAX_PERCENT} (got {gates.shown(value)})")
    return percent


def killed(conn: psycopg.Connection[Any]) -> bool:
    """Whether the kill switch is on: then memory does nothing at all (no writes, no blocks, no events)."""
    return bool(one(conn.execute(query("events/killed")))[0])


class SwitchedOff(Exception):
    """The kill switch is on as a write ends: its transaction rolls back, and it stores and counts nothing."""


@contextlib.contextmanager
def write_transaction(conn: psycopg.Connection[Any], *, read_first: bool = False) -> Iterator[None]:
    """A write's transaction, closed by stored_unless_killed, so no work of the write can come after its last read of
    the kill switch: SwitchedOff, the transaction rolled back, where the switch is on by then; with read_first, the
    switch read unlocked before the transaction too, so a write under a switch on already does no work."""
    if read_first and killed(conn):
        raise SwitchedOff
    with conn.transaction():
        yield
        stored_unless_killed(conn)


def stored_unless_killed(conn: psycopg.Connection[Any]) -> None:
    """A write's last statement before its commit, after every wait: the switch read under its lock, held to the
    commit, so turning the switch on waits only for writes that are committing (drain_writes); SwitchedOff where it
    is on."""
    if one(conn.execute(query("events/writes_killed"), prepare=True))[0]:
        raise SwitchedOff


def holdout_bucket(unit_of_assignment: str) -> float:
    """A stable position in [0, 100) for an epic or task id: the same id always lands in the same arm."""
    return int(hashlib.sha256(unit_of_assignment.encode()).hexdigest()[:8], 16) / 0x100000000 * 100


def resolve(settings: dict[tuple[str, str], str], task_id: str, epic_id: str | None) -> tuple[str, str]:
    """(value, source): the kill switch, then the task setting, the epic setting, the holdout, the system default;
    an explicit setting outranks the holdout, which only assigns tasks nobody decided for."""
    if settings.get(("kill", "")) == "on":
        return "off", V.SWITCH_KILLED
    if ("task", task_id) in settings:
        return settings[("task", task_id)], "task"
    if epic_id and ("epic", epic_id) in settings:
        return settings[("epic", epic_id)], "epic"
    holdout = float(settings.get(("holdout", ""), 0))
    if holdout and holdout_bucket(epic_id or task_id) < holdout:
        return "off", "holdout"
    return settings.get(("system", ""), V.SYSTEM_DEFAULT_MEMORY), "default"


def effective_memory(conn: psycopg.Connection[Any], task_id: str, epic_id: str | None = None) -> dict[str, Any]:
    """Whether memory is on for a task and why; the decision is recorded per task (its A/B arm)."""
    task_id = task_key(task_id)
    epic_id = event_id("epic_id", epic_id)
    settings = {(s, k): v for s, k, v in conn.execute("SELECT scope, key, value FROM memory_switch").fetchall()}
    value, source = resolve(settings, task_id, epic_id)
    conn.execute(query("events/record_arm"), {"task_id": task_id, "epic_id": epic_id, "value": value,
                                              "source": source})
    return {"task_id": task_id, "epic_id": epic_id, "value": value, "source": source}


def arm_of(conn: psycopg.Connection[Any], task_id: str) -> dict[str, Any] | None:
    """A task's recorded memory decision (its A/B arm), so analytics compare the arms; None when never decided."""
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute("SELECT * FROM memory_task_arms WHERE task_id = %s", (task_id,)).fetchone()
