"""The write path: gated candidates captured in the inbox and folded into numbered units; corrections in place."""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.util
import os
import stat
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import date
from typing import Any, TypeVar

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb

from memory_assets import audit, events, gates, lifecycle, tokens, tracing
from memory_assets import vocabulary as V
from memory_assets.database import analyse_if_never_analysed, one, query
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


def record_rejection(conn: psycopg.Connection[Any], project: str, feed: str, reason: str, count: int = 1) -> None:
    """Count rejections per (project, feed, reason, day) and audit them with those counters only: no id of a
    rejected candidate (task, session, persona…) is stored or logged, since any of them may be what was rejected."""
    conn.execute(query("ledger/count_rejection"), {"project": project, "feed": feed, "reason": reason, "count": count})
    audit.record(conn, feed, "reject", project=project, reason=reason, details={"feed": feed, "count": count})
    log.info("rejected candidate project=%s feed=%s reason=%s count=%d", project, feed, reason, count)


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


def capture(conn: psycopg.Connection[Any], candidates: list[gates.Candidate],
            folds_later: bool = False) -> tuple[list[str], list[str]]:
    """Append gated candidates to the inbox in one COPY-backed statement; replays (same idempotency key) are no-ops.
    The keys of the rows it wrote, and of the candidates' rows that wait for a fold: those, and for a caller that
    `folds_later` (by keys, in another transaction) replays of rows captured earlier and never folded, the rows it
    writes then flagged as awaiting that fold (a caller folding them in this transaction links them in HOT updates)."""
    if not candidates:
        return [], []
    columns = ", ".join(V.INBOX_COLUMNS)
    with conn.cursor() as cur:
        cur.execute(query("ledger/create_inbox_stage"))
        with cur.copy(f"COPY inbox_stage ({columns}) FROM STDIN") as copy:
            copy.set_types(V.INBOX_COLUMN_TYPES)
            for candidate in candidates:
                copy.write_row(inbox_row(candidate))
        keys = [c.idempotency_key for c in candidates] if folds_later else []  # read only when replaying
        cur.execute(query("ledger/insert_staged"), {"keys": keys, "folds_later": folds_later})
        staged = cur.fetchall()
        cur.execute("DELETE FROM inbox_stage")
    return [key for key, written in staged if written], [key for key, _ in staged]


def fold(conn: psycopg.Connection[Any], *, day: date | None = None, keys: list[str] | None = None) -> dict[str, int]:
    """Fold unfolded inbox rows of a day or with the given idempotency keys (exactly one of the two) into the
    ledger with set-based SQL; idempotent."""
    if (day is None) == (keys is None):
        raise TypeError("fold: give a day or idempotency keys")
    projects = inserted = linked = buried = 0
    if keys is None or keys:  # given no keys, no fold (insert_staged.sql: an empty list must not reach a statement)
        with conn.transaction():
            if keys is None:
                keys = [row[0] for row in conn.execute(query("ledger/unfolded_keys"), {"day": day})]
            if keys:  # a day remember() folded already
                projects, inserted, linked, buried = one(conn.execute(query("ledger/fold"),
                                                                      {"keys": keys, "trust": V.DEFAULT_TRUST}))
    if projects:
        log.info("folded inbox day=%s projects=%d inserted=%d sources=%d forgotten=%d", day, projects, inserted,
                 linked, buried)
    return {"inserted": inserted, "linked": linked, "forgotten": buried, "projects": projects}


def inbox_json(candidate: gates.Candidate) -> Jsonb:
    """A candidate as a JSON object of V.INBOX_COLUMNS, the one-row form of the inbox a pipeline can send."""
    row = dict(zip(V.INBOX_COLUMNS, inbox_row(candidate), strict=True))
    if row.get("valid_from") is not None:
        row["valid_from"] = row["valid_from"].isoformat()
    return Jsonb(row)


def remember_params(candidate: gates.Candidate, gated: canon.Canon) -> dict[str, Any]:
    """The parameters of ledger/remember for a candidate gated under a canon."""
    return {"row": inbox_json(candidate), "trust": V.DEFAULT_TRUST, "canon": gated.version}


KILLED = RememberResult(status=V.MEMORY_OFF, reason=V.SWITCH_KILLED)


def remember(conn: psycopg.Connection[Any], candidate: gates.Candidate, supersedes: str | None = None,
             canons: canon.Canons | None = None, resent: bool = False) -> RememberResult:
    """The public write path for one candidate: gates, then inbox, then fold; rejected text is never stored, and
    nothing is stored or counted while the kill switch is on (status "off").

    With `supersedes` (a token), the new unit replaces that one in the same transaction. The gates run before the
    transaction opens, so a slow gate never holds a lock. `canons` keeps the canon the gates read (Memory keeps one
    per process), so the write is the call's only statement: it carries the canon's version, and should the canon
    have changed since, it writes nothing and the candidate is gated again under the canon read anew. `resent`: the
    call is sent again because its connection broke before the server answered, so a replay of its own key is the
    write it was (the server may have committed it before the connection broke), not a duplicate.
    """
    supersedes = supersedes_token(supersedes)
    gates.recorded_names([candidate])
    canons = canons if canons is not None else canon.Canons(size=0)
    written = gates.without_source_text(candidate)
    for _ in range(V.REMEMBER_CANON_ATTEMPTS):
        verdict = gated_under_canon(conn, candidate, canons)
        if verdict is None:
            return KILLED
        gated, reason = verdict
        if reason:
            return rejected_unless_killed(conn, candidate, reason)
        with tracing.span("memory.remember.fold"):
            # without a supersession, the capture and fold are one statement (a server-side function,
            # sql/functions/memory_remember_gated.sql), its own transaction on an autocommit connection: one round
            # trip, and the counter row is locked from the fold to the commit only, never across a round trip or
            # this thread's turn for the GIL
            try:
                # in a caller's transaction (a weekly summary's), a savepoint: the switch's error rolls back the write
                # alone, never the caller's work before it
                with conn.transaction() if conn.info.transaction_status != TransactionStatus.IDLE else nullcontext():
                    outcome, unit_id, number, status, replayed = (
                        superseding(conn, written, supersedes, gated) if supersedes
                        else one(conn.execute(query("ledger/remember"), remember_params(written, gated),
                                              prepare=True)))
            except events.SwitchedOff:  # on once a supersession's wait was over: it rolled back
                return KILLED
            except psycopg.Error as error:  # the switch went on meanwhile: the write rolled back (sql/049)
                if error.sqlstate == V.KILLED_SQLSTATE:
                    return KILLED
                raise
        if outcome == V.SWITCH_KILLED:
            return KILLED
        if outcome != V.CANON_CHANGED:
            break
        canons.drop(candidate.project)
    else:
        raise RuntimeError(f"the canon of project {candidate.project} changed during each of "
                           f"{V.REMEMBER_CANON_ATTEMPTS} attempts to remember a candidate")
    if outcome == V.INBOX_FORGOTTEN:
        return rejected_unless_killed(conn, candidate, V.REASON_FORGOTTEN)
    if outcome == V.INBOX_INSERTED and not replayed and number == V.UNITS_ANALYSED_AT_NUMBER:
        analyse_if_never_analysed(conn, V.UNITS_TABLE)  # a project's 50th unit: a young store's first statistics
    status = V.OUTCOME_DUPLICATE if (outcome == V.INBOX_DUPLICATE or (replayed and not resent)) else status
    return RememberResult(status=status, token=tokens.token_of(number), unit_id=str(unit_id))


def rejected_unless_killed(conn: psycopg.Connection[Any], candidate: gates.Candidate, reason: str) -> RememberResult:
    """A rejection counted in a transaction that reads the kill switch last, since the switch may have gone on after
    the read that let the candidate be gated: then nothing is counted and the status is "off"."""
    try:
        with events.write_transaction(conn):
            record_rejection(conn, candidate.project, candidate.feed, reason)
    except events.SwitchedOff:
        return KILLED
    return RememberResult(status=V.OUTCOME_REJECTED, reason=reason)


def gated_under_canon(conn: psycopg.Connection[Any], candidate: gates.Candidate,
                      canons: canon.Canons) -> tuple[canon.Canon, str | None] | None:
    """The gates' verdict and the canon it was given under: the kept canon when it lets the candidate pass (the
    write checks its version), else the canon read now with the kill switch (a rejection is counted only under the
    project's current canon); None while the kill switch is on."""
    kept = canons.known(candidate.project)
    if kept is not None:
        with tracing.span("memory.remember.gates"), _GATING:
            reason = gates.gate(candidate, kept.chunks)
        if not reason:
            return kept, None
    killed, current = canon.write_context(conn, candidate.project)
    if killed:
        return None
    canons.keep(candidate.project, current)
    if kept is not None and current.version == kept.version:
        return kept, reason
    with tracing.span("memory.remember.gates"), _GATING:
        return current, gates.gate(candidate, current.chunks)


def superseding(conn: psycopg.Connection[Any], candidate: gates.Candidate, supersedes: str,
                gated: canon.Canon) -> tuple[Any, ...]:
    """Capture and fold a candidate that replaces the unit `supersedes` names, in one pipelined transaction; its
    statements outside the function are planned as the function's are (ledger/plan_write says why). The fold's
    row: outcome, unit id, number, status, replayed (nothing superseded when the function wrote nothing)."""
    # a write transaction: the supersession may wait on the old unit's row (a vote, a forget) after the function's
    # last read of the switch, so the switch is read again once that wait is over (an attacker's pass stored one after
    # the switch went on)
    with conn.pipeline(), events.write_transaction(conn):
        conn.execute(query("ledger/plan_write"))
        old_id = superseded_id(conn, candidate.project, supersedes, candidate.persona)
        row: tuple[Any, ...] = one(conn.execute(query("ledger/remember"), remember_params(candidate, gated)))
        if row[0] in (V.INBOX_INSERTED, V.INBOX_DUPLICATE):
            lifecycle.supersede(conn, row[1], old_id, actor=candidate.persona or candidate.feed)
    return row


def superseded_id(conn: psycopg.Connection[Any], project: str, token: str, persona: str | None) -> Any:
    """The id of the unit a new one supersedes, as its writer (`persona`) reads it; ValidationError naming
    `supersedes` when the project has none, or only one private to other personas (the same words: no telling)."""
    try:
        return tokens.unit_id_read_by(conn, project, token, persona)
    except ValidationError as error:
        raise ValidationError("supersedes", f"no unit {token} in project {project}") from error


def _gate_chunk(chunk: list[tuple[gates.Candidate, list[list[int]]]]) -> list[str | None]:
    """The gates' verdicts on a chunk of candidates with their projects' canon: what a gate worker runs."""
    return [gates.gate(candidate, canon_chunks) for candidate, canon_chunks in chunk]


_GATE_POOLS: dict[int, ProcessPoolExecutor] = {}
# The gates are pure Python: threads of one process gate one at a time anyway (the GIL), so the others wait here,
# releasing it, and a reader's thread competes with one gating thread instead of every writer's.
_GATING = threading.BoundedSemaphore(1)


def _gate_pool(workers: int) -> ProcessPoolExecutor:
    """A process pool that gates in parallel (the gates are pure Python: threads would share one core), forked
    from this process, which has the gates loaded; kept for the process's next batches."""
    pool = _GATE_POOLS.get(workers)
    if pool is None:
        gates.gate(gates.validate(project="warm", kind="note", type="semantic", title="warm", body="warm"))
        if not _GATE_POOLS:
            # before the pool's queues stop their feeder threads (exit priority 10), or no worker hears 'stop'
            multiprocessing.util.Finalize(None, shutdown_gate_pools, exitpriority=100)
        pool = _GATE_POOLS[workers] = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                                          initializer=_gate_worker_started, initargs=(os.getpid(),))
    return pool


def _gate_worker_started(parent: int) -> None:
    """Let a forked gate worker hold none of its parent's database connections (a worker that outlived a killed
    parent kept its transactions open and its counter rows locked) and outlive it by at most a moment."""
    listed = next((folder for folder in ("/dev/fd", "/proc/self/fd") if os.path.isdir(folder)), None)
    with open(os.devnull, "rb") as nothing:
        for name in os.listdir(listed) if listed else []:
            try:
                if int(name) > 2 and stat.S_ISSOCK(os.fstat(int(name)).st_mode):
                    os.dup2(nothing.fileno(), int(name))  # the number stays taken: nothing reuses a stale one
            except OSError:  # the listing's own descriptor, closed by now
                continue
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    """Exit once the parent is gone, which the worker's own pipes would otherwise keep waiting for work forever."""
    while os.getppid() == parent:
        time.sleep(V.GATE_WORKER_PARENT_CHECK_SECONDS)
    os._exit(0)


def shutdown_gate_pools() -> None:
    """Stop the gate processes at exit, before multiprocessing joins its children: in a process that multiprocessing
    started, it joins them before the executor's own exit hook would stop them, and waits forever."""
    while _GATE_POOLS:
        _GATE_POOLS.popitem()[1].shutdown(wait=True, cancel_futures=True)


@dataclass(frozen=True, eq=False)
class Gating:
    """A batch whose gates were started (in worker processes for a large batch), so that the caller can write the
    batch before it meanwhile; remember_many takes it in place of the candidates, once, and waits for the verdicts.
    Only gate_soon makes one that remember_many accepts: its candidates are a copy the caller cannot change."""

    candidates: tuple[gates.Candidate, ...]
    chunks: tuple[Future[list[str | None]], ...]

    def __len__(self) -> int:
        """How many candidates the batch holds."""
        return len(self.candidates)

    def verdicts(self) -> list[str | None]:
        """Each candidate's rejection reason (None: it passes), in order, once every chunk is gated."""
        return [reason for chunk in self.chunks for reason in chunk.result()]


# The gatings gate_soon made and remember_many has not taken yet: a Gating built anywhere else, or taken twice, is
# refused, so no candidate reaches the inbox with a verdict that the gates did not give it.
_ISSUED: weakref.WeakSet[Gating] = weakref.WeakSet()
_ISSUED_LOCK = threading.Lock()


def gate_soon(conn: psycopg.Connection[Any], candidates: list[gates.Candidate], workers: int = 1) -> Gating:
    """Start the gates on a batch: in `workers` processes for a large batch (this call returns at once), else here;
    first the names a rejection would record (gates.recorded_names: a candidate may be built by hand)."""
    batch = tuple(candidates)
    gates.recorded_names(batch)
    canons: dict[str, list[list[int]]] = {}
    for candidate in batch:
        if candidate.project not in canons:
            canons[candidate.project] = canon.canon_of(conn, candidate.project)
    items = [(candidate, canons[candidate.project]) for candidate in batch]
    if workers <= 1 or len(items) < V.GATE_PROCESS_MIN_BATCH:
        done: Future[list[str | None]] = Future()
        with _GATING:
            done.set_result(_gate_chunk(items))
        chunks: tuple[Future[list[str | None]], ...] = (done,)
    else:
        size = -(-len(items) // (workers * V.GATE_CHUNKS_PER_WORKER))
        pool = _gate_pool(workers)
        chunks = tuple(pool.submit(_gate_chunk, items[i:i + size]) for i in range(0, len(items), size))
    gating = Gating(batch, chunks)
    with _ISSUED_LOCK:
        _ISSUED.add(gating)
    return gating


def taken(gating: Gating) -> Gating:
    """The gating, once: refused (TypeError) when gate_soon did not make it or remember_many took it already."""
    with _ISSUED_LOCK:
        if gating not in _ISSUED:
            raise TypeError("remember_many: a Gating comes from gate_soon and is written once")
        _ISSUED.discard(gating)
    return gating


def remember_many(conn: psycopg.Connection[Any], candidates: list[gates.Candidate] | Gating, *,
                  fold_now: bool = True, gate_workers: int = 1,
                  after_capture: Callable[[], None] | None = None) -> dict[str, Any]:
    """The bulk write path: the gates first, outside any transaction (no lock waits on a gate), then one transaction
    that captures what passed, folds it and counts the rejections, leaving out a row the database refuses (its key
    in `refused`, counted in memory_rejections; `rejected` holds the gates' alone); `after_capture` runs between
    the capture and the fold (the import's turn), and forgotten text captured to fold later is buried at once. With
    the kill switch on when the transaction commits, nothing is written or counted (all counts 0, "off": True)."""
    with tracing.span("memory.remember.gates", candidates=len(candidates)):
        gating = taken(candidates) if isinstance(candidates, Gating) else gate_soon(conn, candidates, gate_workers)
        verdicts = gating.verdicts()
    batch = gating.candidates
    passed: dict[str, gates.Candidate] = {}  # by key, the first of each (the capture writes no later one)
    rejections: dict[tuple[str, str, str], int] = {}  # counted in memory_rejections
    rejected: dict[str, int] = {}  # the gates' rejections, by reason
    for candidate, reason in zip(batch, verdicts, strict=True):
        if reason:
            counted = (candidate.project, candidate.feed, reason)
            rejections[counted] = rejections.get(counted, 0) + 1
            rejected[reason] = rejected.get(reason, 0) + 1
        else:
            passed.setdefault(candidate.idempotency_key, gates.without_source_text(candidate))
    try:
        with (tracing.span("memory.remember.fold", candidates=len(passed)),
              events.write_transaction(conn, read_first=True)):
            written, to_fold, refused, folded = written_and_folded(conn, passed, rejections, fold_now, after_capture)
    except events.SwitchedOff:
        return {"captured": 0, "inserted": 0, "rejected": {}, "to_fold": [], "refused": {}, V.MEMORY_OFF: True}
    refused.update(folded["refused"])
    return {"captured": len(set(written) - refused.keys()), "inserted": folded["inserted"], "rejected": rejected,
            "to_fold": [] if fold_now else to_fold, "refused": refused}


def written_and_folded(conn: psycopg.Connection[Any], passed: dict[str, gates.Candidate],
                       rejections: dict[tuple[str, str, str], int], fold_now: bool,
                       after_capture: Callable[[], None] | None) -> tuple[list[str], list[str], dict[str, str],
                                                                          dict[str, Any]]:
    """remember_many's work inside its transaction: the capture, the import's turn, the fold and the counts of
    rejections; the keys written, to fold and refused, and the fold's counts."""
    written, to_fold, refused = capture_leaving_out_refused(conn, list(passed.values()), folds_later=not fold_now)
    if written and not fold_now:  # forgotten text never waits in the inbox for a fold
        conn.execute(query("ledger/bury_forgotten"), {"keys": written})
    if after_capture is not None:
        after_capture()
    keys = [key for key in passed if key not in refused]
    folded: dict[str, Any] = {"inserted": 0, "refused": {}}
    if fold_now and keys:
        folded = fold_dropping_refused(conn, keys=keys)
    for key in refused:
        counted = (passed[key].project, passed[key].feed, V.REASON_REFUSED_BY_DATABASE)
        rejections[counted] = rejections.get(counted, 0) + 1
    # counted last, in key order: the counter rows the import's batch before this one counted are free by now
    for project, feed, reason in sorted(rejections):
        record_rejection(conn, project, feed, reason, rejections[project, feed, reason])
    conn.execute(query("database/flush_statistics"))  # counted before a later ANALYZE, never after it
    return written, to_fold, refused, folded


def capture_leaving_out_refused(conn: psycopg.Connection[Any], candidates: list[gates.Candidate],
                                folds_later: bool) -> tuple[list[str], list[str], dict[str, str]]:
    """capture() of a batch in a savepoint, and where the database refuses a row's own values each candidate in
    its own, so only those it refuses are left out: the keys written, to fold, and refused (with the error)."""
    try:
        with conn.transaction():
            written, to_fold = capture(conn, candidates, folds_later)
        return written, to_fold, {}
    except ROW_REFUSALS:
        pass
    captured, refused = each_alone(conn, {c.idempotency_key: c for c in candidates},
                                   lambda candidate: capture(conn, [candidate], folds_later))
    written = [key for keys, _ in captured for key in keys]
    to_fold = [key for _, keys in captured for key in keys]
    return written, to_fold, refused


def fold_captured(conn: psycopg.Connection[Any], keys: list[str]) -> dict[str, Any]:
    """Fold the rows a capture left unfolded (remember_many's to_fold) in their own transaction: how many became new
    units, whichever fold took them (a ledger run may have folded some first), and the keys whose unit the
    database refused (with the error's class name), dropped as fold_dropping_refused says; nothing ("off") under
    the kill switch."""
    if not keys:  # nothing to fold (insert_staged.sql says why an empty list must not reach a statement)
        return {"inserted": 0, "refused": {}}
    try:
        with events.write_transaction(conn):
            refused = fold_dropping_refused(conn, keys=keys)["refused"]
    except events.SwitchedOff:  # the rows wait for the ledger's fold, an operator's work, which goes on
        return {"inserted": 0, "refused": {}, V.MEMORY_OFF: True}
    conn.execute(query("database/flush_statistics"))  # counted before a later ANALYZE, never after it
    inserted = one(conn.execute(query("ledger/captured_new_units"), {"keys": keys}))[0]
    return {"inserted": inserted, "refused": refused}


# what the database says of a row's own values; another integrity error (a unit number taken, a missing key) says
# the store is wrong, not the row, and dropping the day's rows for it would lose them
ROW_REFUSALS = (psycopg.errors.CheckViolation, psycopg.errors.NotNullViolation, psycopg.DataError)


Item = TypeVar("Item")
Written = TypeVar("Written")


def each_alone(conn: psycopg.Connection[Any], items: dict[str, Item],
               write: Callable[[Item], Written]) -> tuple[list[Written], dict[str, str]]:
    """write() each item in a savepoint of its own, once the database refused a row's own values among them all, so
    only those it refuses are left out: what each write gave, and the refused items' keys with the error's class
    name (any other error, a unique number taken say, is the store's fault: raised)."""
    results: list[Written] = []
    refused: dict[str, str] = {}
    for key, item in items.items():
        try:
            with conn.transaction():
                results.append(write(item))
        except ROW_REFUSALS as error:
            refused[key] = type(error).__name__
    return results, refused


def fold_dropping_refused(conn: psycopg.Connection[Any], *, day: date | None = None,
                          keys: list[str] | None = None) -> dict[str, Any]:
    """fold() of a day's rows (the ledger asset) or of keys (remember_many, fold_captured); where the database refuses
    a row's own values (a value past validation that a CHECK refuses), each row folded alone, and the ones it refuses
    leave the inbox, counted as rejections (REASON_REFUSED_BY_DATABASE, no text kept): left there, one refused row (a
    capture to fold later whose writer stopped) would fail every later fold of its day. The counts, and the keys
    refused with the error's class name."""
    try:
        return {**fold(conn, day=day, keys=keys), "refused": {}}
    except ROW_REFUSALS:
        pass
    if keys is None:
        keys = [row[0] for row in conn.execute(query("ledger/unfolded_keys"), {"day": day})]
    folded, refused = each_alone(conn, {key: key for key in keys}, lambda key: fold(conn, keys=[key]))
    totals = {name: sum(counts[name] for counts in folded) for name in ("inserted", "linked", "forgotten", "projects")}
    if refused:
        with conn.transaction():
            for project, feed, count in conn.execute(query("ledger/drop_refused"), {"keys": list(refused)}).fetchall():
                record_rejection(conn, project, feed, V.REASON_REFUSED_BY_DATABASE, count)
        log.warning("dropped %d captured rows the database refused to fold reasons=%s", len(refused),
                    sorted(set(refused.values())))
    return {**totals, "refused": refused}


def correct(conn: psycopg.Connection[Any], project: str, token: str, *, title: str | None = None,
            body: str | None = None, keywords: list[str] | None = None, actor: str = "api") -> int:
    """Correct a unit's text in place (same fact, better words): gated again; the revision rises, old vectors die.
    A forgotten unit is refused: its tombstone never takes text again. The fields it leaves are the ones it read,
    written only if the unit's text is still that revision (else read and gated again), so two corrections of
    different fields at once both land."""
    actor = gates.identifier("actor", actor, required=True)  # it is written to the unit and the audit log
    for _ in range(V.CORRECT_ATTEMPTS):
        current = units.unit_row(conn, project, token)
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
        revision = corrected(conn, current, candidate, actor)
        if revision is not None:
            return revision
    raise ValidationError("token", f"{token} was corrected by others during each of {V.CORRECT_ATTEMPTS} attempts")


def corrected(conn: psycopg.Connection[Any], current: dict[str, Any], candidate: gates.Candidate,
              actor: str) -> int | None:
    """Write a correction over the revision `current` read; its new revision, or None when the unit was forgotten
    or its text changed since (the caller reads it again)."""
    try:
        with conn.transaction():
            # the project's counter row, as a fold and a forget hold it: a forget in flight (which takes every unit
            # holding the text) commits first, and the probe below sees its tombstone's every wording
            conn.execute(query("lifecycle/hold_folds"), {"project": current["project"]})
            holder = conn.execute(query("ledger/content_holder"), {
                "project": current["project"], "kind": candidate.kind, "content_hash": candidate.content_hash,
                "unit_id": current["id"]}).fetchone()
            if holder is not None:
                number, forgotten, private = holder
                raise ValidationError("body", "this text was forgotten in the project and is not stored again"
                                      if forgotten else "another unit of the project already holds this text"
                                      if private else f"{tokens.token_of(number)} already holds this text")
            row = conn.execute(query("ledger/correct_unit"), {
                "title": candidate.title, "body": candidate.body, "keywords": list(candidate.keywords),
                "content_hash": candidate.content_hash, "actor": actor, "unit_id": current["id"],
                "read_revision": current["revision"], "read_content_hash": current["content_hash"]}).fetchone()
            if row is None:  # forgotten or corrected since the read: the caller reads it again
                return None
            revision: int = row[0]
            audit.record(conn, actor, "correct", project=current["project"], unit_id=current["id"],
                         details={"revision": revision})
            lifecycle.retire_summaries_of(conn, current, actor)
            return revision
    except psycopg.errors.UniqueViolation as error:  # a write that holds no counter row made it live since the probe
        raise ValidationError("body", "another unit of the project now holds this text") from error
