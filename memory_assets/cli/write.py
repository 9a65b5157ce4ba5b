"""The write commands: remember one unit, import a JSON-lines file, both through the same gates."""

from __future__ import annotations

import heapq
import json
import os
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, BinaryIO

import click
from tqdm import tqdm

from memory_assets import gates
from memory_assets import vocabulary as V
from memory_assets.api import Gating, Memory
from memory_assets.cli.common import (
    EXIT_BAD_INPUT,
    emit,
    json_option,
    memory,
    parse_json,
    read_json_object,
    read_text,
    remember_fields,
)
from memory_assets.errors import ValidationError


@click.command()
@click.option("--project")
@click.option("--kind", type=str)
@click.option("--type", "type_", type=str)
@click.option("--title")
@click.option("--body")
@click.option("--path", "paths", multiple=True, help="Repeat for several paths.")
@click.option("--keyword", "keywords", multiple=True, help="Repeat for several keywords.")
@click.option("--confidence", type=float)
@click.option("--importance", type=float)
@click.option("--feed")
@click.option("--task-id")
@click.option("--session-id")
@click.option("--persona")
@click.option("--model")
@click.option("--observed-sha")
@click.option("--source-ref")
@click.option("--supersedes", help="Token of the unit this one replaces (kept as history).")
@click.option("--private", is_flag=True, help="Only the contributing --persona may recall it; never bundled.")
@click.option("--source-file", type=click.Path(dir_okay=False), help="File the body was learned from (verbatim gate).")
@click.option("--json-file", type=click.Path(dir_okay=False), help="Read the fields from a JSON object instead.")
@json_option
def remember(project: str | None, kind: str | None, type_: str | None, title: str | None, body: str | None,
             paths: tuple[str, ...], keywords: tuple[str, ...], confidence: float | None, importance: float | None,
             feed: str | None, task_id: str | None, session_id: str | None, persona: str | None, model: str | None,
             observed_sha: str | None, source_ref: str | None, supersedes: str | None, private: bool,
             source_file: str | None, json_file: str | None, as_json: bool) -> None:
    """Remember one unit through the gates; prints its status and token."""
    fields: dict[str, Any] = read_json_object(json_file) if json_file else {}
    flags = {"project": project, "kind": kind, "type": type_, "title": title, "body": body,
             "paths": list(paths) or None, "keywords": list(keywords) or None, "confidence": confidence,
             "importance": importance, "feed": feed, "task_id": task_id, "session_id": session_id,
             "persona": persona, "model": model, "observed_sha": observed_sha, "source_ref": source_ref}
    fields.update({k: v for k, v in flags.items() if v is not None})
    if private:
        fields["visibility"] = V.VISIBILITY_PRIVATE
    if source_file:
        fields["source_text"] = read_text(source_file, "source_file", V.SOURCE_TEXT_MAX_BYTES)
    arguments = remember_fields(fields)
    with memory() as mem:
        result = mem.remember(**arguments, supersedes=supersedes)
    data = {"status": result.status, "token": result.token, "unit_id": result.unit_id, "reason": result.reason}
    emit(data, as_json, f"{result.status} {result.token or result.reason}")


class BatchBeforeFailed(Exception):
    """A batch of an import left out because the batch before it failed, so the import stops at that batch."""


class _Turn:
    """One batch's place in the import's file order, so every wait runs from a batch to the one before it and a
    failed batch fails every batch after it (a stopped import has imported the file's first batches)."""

    def __init__(self, before: _Turn | None) -> None:
        self.before = before
        self.captured = threading.Event()  # the next batch may capture
        self.ended = threading.Event()  # the next batch may fold and commit
        self.failed = False

    def take(self) -> None:
        """Once this batch is captured (remember_many's after_capture), let the next batch capture and wait for the
        batch before this one to end its transaction, failing (BatchBeforeFailed) where that one failed."""
        self.captured.set()
        if not self.wait_for_before():
            raise BatchBeforeFailed("the batch before this one failed")

    def wait_for_before(self) -> bool:
        """Whether the batch before this one committed, once it has ended (asked once: the turn then forgets it, so
        a long import's turns are not kept alive one by the next)."""
        before, self.before = self.before, None
        if before is None:
            return True
        before.ended.wait()
        return not before.failed

    def end(self, committed: bool) -> None:
        """Mark this batch's transaction ended, once the batch before it has too (a batch that failed before its
        turn waits for it here), so the next batch takes its turn after both."""
        self.captured.set()
        self.failed = not self.wait_for_before() or not committed
        self.ended.set()


class _Import:
    """The running totals of one import, whose writer threads capture one batch while the server folds the one
    before, each batch in one transaction, in file order (a stopped import leaves no row waiting for a fold)."""

    def __init__(self, mem: Memory, fold_now: bool) -> None:
        self.mem = mem
        self.fold_now = fold_now
        self.gate_workers = os.cpu_count() or 1
        self.batch: list[tuple[int, gates.Candidate]] = []
        self.batch_size = min(V.IMPORT_FIRST_BATCH, V.IMPORT_BATCH)  # doubled at each batch up to IMPORT_BATCH
        self.bad_lines = BadLines()
        self.totals: dict[str, Any] = {"lines": 0, "captured": 0, "inserted": 0, "rejected": {}}
        self.writers = ThreadPoolExecutor(V.IMPORT_WRITERS, thread_name_prefix="import-writer")
        self.turn: _Turn | None = None  # the last batch handed to the writers
        # the batches handed over, in file order, until counted
        self.writing: deque[tuple[Future[dict[str, Any]], list[tuple[int, gates.Candidate]]]] = deque()
        self.stopped = False  # a batch's error was raised: the batches after it are waited for, not counted
        self.refused: dict[str, str] = {}  # the keys refused so far, with the error's class name
        self.merging: Future[bool] | None = None  # after the last batch's commit

    def add(self, number: int, candidate: gates.Candidate) -> None:
        """Queue one candidate with its line number; a full batch goes to the writers at once."""
        self.batch.append((number, candidate))
        if len(self.batch) >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        """Start gating the queued candidates, then hand them to the writers once the batch before is captured, so
        the gate processes work on this batch while the server captures and folds the ones before."""
        if not self.batch:
            return
        batch, self.batch = self.batch, []
        self.batch_size = min(2 * self.batch_size, V.IMPORT_BATCH)
        gating = self.mem.gate_soon([c for _, c in batch], gate_workers=self.gate_workers)
        self.wait_for_last_capture()
        turn = _Turn(self.turn)
        self.writing.append((self.writers.submit(self.write, gating, turn), batch))  # waited for by close()
        self.turn = turn

    def wait_for_last_capture(self) -> None:
        """Wait for the last batch handed over to be captured, counting the batches written meanwhile (the first
        error among them is raised here)."""
        if self.turn is not None:
            self.turn.captured.wait()
        self.count_written()

    def close(self) -> None:
        """Wait for every batch handed over (after an error or an interrupt too, whose batches are not counted), so
        the totals are complete and no writer outlives the command."""
        try:
            self.count_written(every=True)
            if self.merging is not None:
                self.merging.result()
        finally:
            self.writers.shutdown()

    def refresh_beside_last_fold(self) -> int:
        """ANALYZE the units beside the last folds (the one step that leaves a core idle) where the batches
        committed so far took the store past autovacuum's threshold, merging the full-text index's pending entries
        after the last commit: the rows the ANALYZE counted (0 when it did not run), for the refresh after."""
        last = self.turn
        self.count_written()
        committed = self.totals["inserted"]
        if not self.fold_now or last is None or not committed or not self.mem.statistics_stale(committed):
            return 0
        self.merging = self.writers.submit(self.merge_after, last)
        return committed if self.mem.analyse_statistics() else 0

    def merge_after(self, last: _Turn) -> bool:
        """Merge the full-text index's pending entries once the last batch's transaction has ended."""
        last.ended.wait()
        return self.mem.merge_full_text_pending()

    def write(self, gating: Gating, turn: _Turn) -> dict[str, Any]:
        """Capture and fold a gated batch in one transaction, in its turn (a batch the kill switch refused counts
        as failed, so none after it is written either): its counts."""
        committed = False
        try:
            counts = self.mem.remember_many(gating, fold_now=self.fold_now, after_capture=turn.take)
            committed = not counts.get(V.MEMORY_OFF)
        finally:
            turn.end(committed)
        return counts

    def count_written(self, every: bool = False) -> None:
        """Count the written batches in file order, those done or with `every` all of them (waiting for each),
        raising the first batch's error (never one after it: each failed because of it)."""
        while self.writing and (every or self.writing[0][0].done()):
            written, batch = self.writing.popleft()
            if self.stopped or isinstance(written.exception(), BatchBeforeFailed):
                continue
            try:
                counts = written.result()
            except BaseException:
                self.stopped = True
                raise
            if counts.get(V.MEMORY_OFF):  # nothing stored: the run says memory is off
                self.totals[V.MEMORY_OFF] = True
                continue
            self.totals["captured"] += counts["captured"]
            self.totals["inserted"] += counts["inserted"]
            rejected = self.totals["rejected"]
            for reason, n in counts["rejected"].items():
                rejected[reason] = rejected.get(reason, 0) + n
            self.refused.update(counts["refused"])
            if self.refused:
                self.report_refused(batch)

    def report_refused(self, batch: list[tuple[int, gates.Candidate]]) -> None:
        """Report the batch's lines whose key the database refused, here or in a batch before (whose fold dropped a
        row this batch's capture had read as captured already), once a key a batch."""
        lines = {candidate.idempotency_key: number for number, candidate in reversed(batch)}
        for key in self.refused.keys() & lines.keys():
            self.bad_lines.add(lines[key], refused_line(lines[key], self.refused[key]))


class BadLines:
    """An import's bad lines: every one counted, the IMPORT_ERRORS_SHOWN of the lowest numbers kept to report (a
    file of bad lines kept every message: 80 times its size in memory, and as much on stderr)."""

    def __init__(self) -> None:
        self.count = 0
        self._kept: list[tuple[int, str]] = []  # a heap of (-number, message): the highest kept number on top

    def add(self, number: int, message: str) -> None:
        """Count one bad line, keeping its message while it is among the lowest numbers."""
        self.count += 1
        if len(self._kept) < V.IMPORT_ERRORS_SHOWN:
            heapq.heappush(self._kept, (-number, message))
        elif number < -self._kept[0][0]:
            heapq.heapreplace(self._kept, (-number, message))

    def shown(self) -> list[str]:
        """The kept messages by line number."""
        return [message for _, message in sorted(self._kept, reverse=True)]


def refused_line(number: int, error: str) -> str:
    """The report of a line the database refused (its capture or its fold), by number and error class only."""
    return f"line {number}: refused by the database ({error})"


def candidate_of_line(raw: bytes, default_project: str | None) -> gates.Candidate:
    """A validated candidate from one JSON line, so a bad line is reported by number and the rest imports."""
    fields = parse_json(raw.decode("utf-8"), "line")
    if not isinstance(fields, dict):
        raise ValidationError("line", "must be a JSON object")
    return gates.validate(**remember_fields(fields, default_project))


def bounded_lines(handle: BinaryIO) -> Iterator[bytes | None]:
    """The file's lines, each read only up to V.IMPORT_MAX_LINE_BYTES: a longer one is skipped and yields None."""
    while line := handle.readline(V.IMPORT_MAX_LINE_BYTES + 1):
        if len(line) > V.IMPORT_MAX_LINE_BYTES and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):
                line = handle.readline(V.IMPORT_MAX_LINE_BYTES)
            yield None
        else:
            yield line


def line_error(raw: bytes | None, default_project: str | None) -> tuple[gates.Candidate | None, str | None]:
    """One line's candidate, or why it is bad (invalid UTF-8 or JSON, too long or deep, a field's rule)."""
    if raw is None:
        return None, f"longer than {V.IMPORT_MAX_LINE_BYTES} bytes"
    try:
        return candidate_of_line(raw, default_project), None
    except UnicodeDecodeError as error:
        return None, f"not valid UTF-8 (byte {error.start})"
    except json.JSONDecodeError as error:
        return None, f"not valid JSON ({error.msg})"
    except ValidationError as error:
        return None, str(error)


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False, exists=True))
@click.option("--project", help="Project for lines that name none.")
@click.option("--no-fold", is_flag=True, help="Leave the rows in the inbox for the ledger sensor to fold.")
@json_option
@click.pass_context
def import_(ctx: click.Context, file: str, project: str | None, no_fold: bool, as_json: bool) -> None:
    """Import a JSON-lines file through the same gates; a bad line is reported by number and the rest imports."""
    with memory() as mem, open(file, "rb") as handle:
        run = _Import(mem, fold_now=not no_fold)
        try:
            lines = tqdm(bounded_lines(handle), desc="import", unit="line", disable=None)
            for number, raw in enumerate(lines, start=1):
                run.totals["lines"] += 1
                if raw is not None and not raw.strip():
                    continue
                candidate, error = line_error(raw, project)
                if candidate is None:
                    run.bad_lines.add(number, f"line {number}: {error}")
                else:
                    run.add(number, candidate)
            run.flush()
            run.wait_for_last_capture()  # the folds of the last batches are the work left
            counted = run.refresh_beside_last_fold()
        finally:
            run.close()
        mem.refresh_statistics(run.totals["inserted"] - counted)  # the rows it missed, should they pass the threshold
    errors = run.bad_lines.shown()
    totals = {**run.totals, "errors": errors, "bad_lines": run.bad_lines.count}
    stored = ("the batches after it stored nothing" if totals["captured"] or totals["inserted"] or totals["rejected"]
              else "nothing stored")
    off = f" memory is off (the kill switch): {stored}." if totals.get(V.MEMORY_OFF) else ""
    emit(totals, as_json, f"imported {totals['captured']} of {totals['lines']} lines "
                          f"({totals['inserted']} new units, rejected {totals['rejected']}, "
                          f"{run.bad_lines.count} bad lines){off}")
    for error in errors:
        click.echo(f"error: {error}", err=True)
    if run.bad_lines.count > len(errors):
        click.echo(f"error: … and {run.bad_lines.count - len(errors)} more bad lines (the first "
                   f"{len(errors)} are shown)", err=True)
    if run.bad_lines.count:
        ctx.exit(EXIT_BAD_INPUT)
