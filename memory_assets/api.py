"""The public Python API agents call: one Memory object over a connection pool."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime
from typing import Any, Self, TypeVar

import numpy as np
import psycopg
from psycopg_pool import ConnectionPool

from memory_assets import authz, bundle, curation, database, embeddings, events, gates, lifecycle, recall, tracing
from memory_assets import vocabulary as V
from memory_assets.ledger import canon, capture, units
from memory_assets.ledger.capture import Gating as Gating  # re-exported: the import passes it back
from memory_assets.ledger.capture import RememberResult
from memory_assets.recall import RecallResult
from memory_assets.recall import rerank as cross_encoder
from memory_assets.recall.request import opening, validate_query

log = logging.getLogger(__name__)
T = TypeVar("T")


class QueryVectors:
    """Query vectors by model key and normalised query: the model behind a bounded cache, so a repeated question
    skips it, and what recall() asks before it encodes (at_hand, warm) to encode while the server runs the
    full-text leg; None where the model is unavailable (recall degrades to full text, never fails)."""

    def __init__(self, size: int = V.QUERY_VECTOR_CACHE_SIZE) -> None:
        self.size = size
        self._vectors: OrderedDict[tuple[str, str], np.ndarray[Any, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, model_key: str, query: str) -> np.ndarray[Any, Any] | None:
        """The query's read-only vector under a model, encoded once per normalised query while it stays cached."""
        key = (model_key, gates.normalise(query))
        vector = self._cached(key)
        if vector is not None:
            return vector
        try:
            vector = embeddings.encode_query(model_key, key[1])
        except Exception as error:  # degrade to sparse recall, never fail
            log.warning("query encoder unavailable model=%s reason=%s", model_key, type(error).__name__)
            return None
        with self._lock:
            self._vectors[key] = vector
            if len(self._vectors) > self.size:
                self._vectors.popitem(last=False)
        return vector

    def at_hand(self, model_key: str, query: str) -> np.ndarray[Any, Any] | None:
        """The query's vector when it is cached, without the model."""
        return self._cached((model_key, gates.normalise(query)))

    def warm(self, model_key: str) -> bool:
        """Whether the model's query encoder is loaded in this process: encoding takes milliseconds, not a load."""
        return embeddings.query_encoder_loaded(model_key)

    def clear(self) -> None:
        """Forget every cached vector (a benchmark timing each question's encoding)."""
        with self._lock:
            self._vectors.clear()

    def _cached(self, key: tuple[str, str]) -> np.ndarray[Any, Any] | None:
        with self._lock:
            vector = self._vectors.get(key)
            if vector is not None:
                self._vectors.move_to_end(key)
            return vector


encode_query = QueryVectors()  # the default encoder of every Memory in the process


class Memory:
    """Long-term memory for agents: remember, look up and count units in one PostgreSQL ledger."""

    def __init__(self, pool: ConnectionPool[Any], url: str,
                 encoder: recall.QueryEncoder | None = encode_query) -> None:
        """Memory over an open pool; `encoder` turns queries into vectors (None: full-text recall only)."""
        self.pool = pool
        self.url = url
        self.encoder = encoder
        self.canons = canon.Canons()  # each project's canon as this process's writes last read it

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection for one unit of work, returned to the pool afterwards."""
        with self.pool.connection() as conn:
            yield conn

    def close(self) -> None:
        """Close the pool, so a short-lived process leaves no connections behind."""
        self.pool.close()

    def __enter__(self) -> Self:
        """Use memory in a with block that closes the pool at the end."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the pool when the with block ends, error or not."""
        self.close()

    @tracing.traced("memory.remember", tracing.fields("status", "reason", "token", "unit_id"))
    def remember(
        self,
        project: str,
        kind: str,
        type: str,
        title: str,
        body: str,
        paths: list[str] | None = None,
        keywords: list[str] | None = None,
        confidence: float = V.DEFAULT_CONFIDENCE,
        importance: float = V.DEFAULT_IMPORTANCE,
        feed: str = "api",
        task_id: str | None = None,
        session_id: str | None = None,
        persona: str | None = None,
        model: str | None = None,
        observed_sha: str | None = None,
        source_text: str | None = None,
        source_ref: str | None = None,
        valid_from: datetime | None = None,
        supersedes: str | None = None,
        visibility: str = V.DEFAULT_VISIBILITY,
    ) -> RememberResult:
        """Validate, gate, dedupe and store one unit; a ValidationError names the field and its limit. With the kill
        switch on nothing is stored or counted: the status is "off" (no token, reason "killed")."""
        with tracing.span("memory.remember.validate"):
            candidate = gates.validate(
                project=project, kind=kind, type=type, title=title, body=body, paths=paths, keywords=keywords,
                confidence=confidence, importance=importance, feed=feed, task_id=task_id, session_id=session_id,
                persona=persona, model=model, observed_sha=observed_sha, source_ref=source_ref,
                valid_from=valid_from, visibility=visibility, source_text=source_text,
            )
        tracing.annotate(project=candidate.project, feed=candidate.feed, kind=candidate.kind, type=candidate.type)
        if supersedes is not None:  # several statements in one transaction: the pool checks the connection first
            with self.connection() as conn:
                return capture.remember(conn, candidate, supersedes=supersedes, canons=self.canons)
        # the write is idempotent (its key): it is the connection's check
        return self._checked_by_first_answer("remember", lambda conn, resent: capture.remember(
            conn, candidate, canons=self.canons, resent=resent))

    def _checked_by_first_answer(self, name: str, call: Callable[[psycopg.Connection[Any], bool], T]) -> T:
        """Save the pool's check, a round trip of its own, for a call whose first round trip may be sent twice: it
        runs again, told so (its second argument), on a checked connection if its own broke before any answer."""
        with database.first_answer_checks(self.pool) as conn:
            try:
                return call(conn, False)
            except psycopg.OperationalError:
                if not database.broke_before_an_answer(conn):
                    raise
        log.info("%s: the connection broke before the server answered; sent again on a checked one", name)
        with self.connection() as conn:
            return call(conn, True)

    def gate_soon(self, candidates: list[gates.Candidate], *, gate_workers: int = 1) -> Gating:
        """Start gating a batch (in `gate_workers` processes for a large one) while the batch before it is written:
        pass the result to remember_many, which waits for its verdicts (the import overlaps its batches so)."""
        with self.connection() as conn:
            return capture.gate_soon(conn, candidates, gate_workers)

    @tracing.traced("memory.remember_many", tracing.fields("captured", "inserted", "rejected", V.MEMORY_OFF))
    def remember_many(self, candidates: list[gates.Candidate] | Gating, *, fold_now: bool = True,
                      gate_workers: int = 1, after_capture: Callable[[], None] | None = None) -> dict[str, Any]:
        """Bulk write path (imports, evaluations): every candidate gated (in `gate_workers` processes for a large
        batch, or by gate_soon beforehand), the rest captured and (by default) folded in one transaction, a row the
        database refuses left out (its key in `refused`); unfolded, the keys of the rows that wait for a fold
        (to_fold, for fold_captured), forgotten text among them buried at once; with the kill switch on nothing is
        (all counts 0, "off": True). `after_capture` runs in the transaction between the capture and the fold (the
        import's turn: capture.remember_many)."""
        tracing.annotate(candidates=len(candidates))
        with self.connection() as conn:
            return capture.remember_many(conn, candidates, fold_now=fold_now, gate_workers=gate_workers,
                                         after_capture=after_capture)

    @tracing.traced("memory.fold_captured", tracing.fields("inserted"))
    def fold_captured(self, keys: list[str]) -> dict[str, Any]:
        """Fold what remember_many(fold_now=False) left unfolded (its to_fold): how many became new units, and the
        keys the database refused, whose rows are dropped (capture.fold_captured)."""
        with self.connection() as conn:
            return capture.fold_captured(conn, keys)

    def refresh_statistics(self, written: int = 0) -> bool:
        """After a bulk load (the import): ANALYZE the units when they changed past autovacuum's threshold, so the
        next recall is planned on statistics that know them (database.refresh_statistics)."""
        with self.connection() as conn:
            return database.refresh_statistics(conn, V.UNITS_TABLE, written)

    def statistics_stale(self, written: int = 0) -> bool:
        """Whether the units changed past autovacuum's threshold: the import asks before its last fold ends, to
        refresh the statistics of the batches before it beside that fold."""
        with self.connection() as conn:
            return database.statistics_stale(conn, V.UNITS_TABLE, written)

    def analyse_statistics(self) -> bool:
        """ANALYZE the units now (False when a VACUUM or ANALYZE held them): the import's refresh beside its fold."""
        with self.connection() as conn:
            return database.analyse(conn, V.UNITS_TABLE)

    def merge_full_text_pending(self) -> bool:
        """Merge the full-text index's pending entries, which the planner prices into every scan of it (False when
        another merge held them): the import does so after its last fold, beside its ANALYZE."""
        with self.connection() as conn:
            return database.merge_gin_pending(conn, V.UNITS_TABLE)

    def recall(self, project: str, query: str, k: int = V.RECALL_DEFAULT_K, as_of: datetime | None = None,
               kinds: list[str] | None = None, types: list[str] | None = None, paths: list[str] | None = None,
               actor: authz.Actor | None = None, legs: str = "hybrid", *, prf: bool | None = None,
               second_round: bool | None = None, rerank: bool | None = None) -> RecallResult:
        """Hybrid recall of active units valid at `as_of` (default now), with score components and citations, as
        `actor` (default: a reader of the project naming no persona); no hits, mode "off", under the kill switch.
        `prf`, `second_round` and `rerank` switch the query-side stages (None: the vocabulary's defaults); the
        reranker is the cross-encoder folder RERANKER_PATH_ENV names."""
        rerank = V.RECALL_RERANK if rerank is None else rerank
        reranker = cross_encoder.configured() if rerank else None  # loaded (once) before a connection is held

        def recalled(conn: psycopg.Connection[Any], _resent: bool) -> RecallResult:
            killed, serving_model = opening(conn)  # a read, sent twice harmlessly: the connection's check
            if killed:
                validate_query(project, query, k, kinds, types, paths, as_of, legs)
                return RecallResult(hits=[], mode=V.MEMORY_OFF, notes=["memory is off: the kill switch is on"])
            return recall.recall(conn, project, query, k, as_of=as_of, kinds=kinds, types=types, paths=paths,
                                 actor=actor, encoder=self.encoder, legs=legs, prf=prf, second_round=second_round,
                                 rerank=rerank, reranker=reranker, serving_model=serving_model)

        return self._checked_by_first_answer("recall", recalled)

    def forget(self, project: str, token: str, actor: authz.Actor, reason: str | None = None) -> str:
        """Tombstone a unit everywhere for good; returns its id. Like the CLI and the MCP server, only an operator
        the deployment lists in MEMORY_ASSETS_OPERATORS may (ScopeError otherwise), with the forget scope."""
        authz.require_operator(actor.name)
        with self.connection() as conn:
            return lifecycle.forget(conn, project, token, actor, reason)

    def confirm(self, project: str, token: str, task_id: str, actor: str = "api",
                persona: str | None = None) -> dict[str, Any]:
        """One confirmation per (unit, task): trust rises. As recall reads, a vote reaches a unit private to a persona
        only when it names that `persona`."""
        with self.connection() as conn:
            return lifecycle.vote(conn, project, token, task_id, 1, actor, persona)

    def flag(self, project: str, token: str, task_id: str, actor: str = "api",
             persona: str | None = None) -> dict[str, Any]:
        """One flag per (unit, task): trust falls; past the threshold the unit is flagged and leaves recall. As recall
        reads, a vote reaches a unit private to a persona only when it names that `persona`."""
        with self.connection() as conn:
            return lifecycle.vote(conn, project, token, task_id, -1, actor, persona)

    def history(self, project: str, token: str, actor: authz.Actor | None = None) -> list[dict[str, Any]]:
        """The supersession chain through a unit, oldest first, of the units `actor` may see (default: a reader of
        the project naming no persona); ValidationError when it may not see the unit."""
        with self.connection() as conn, authz.scoped(conn, actor or authz.Actor.reader(project)):
            return lifecycle.history(conn, project, token)

    def prompt_block(self, project: str, query: str | None = None, task_id: str | None = None,
                     epic_id: str | None = None, actor: authz.Actor | None = None) -> str:
        """A <memories> block of ≤ 8 units (recalled for the query, else the bundle's best) that `actor` may see,
        marked as untrusted data; rendering records `injected` events. Empty, and nothing recorded, when memory is
        off for the task or the kill switch is on."""
        project = gates.project_name(project)  # every argument is checked before the task's arm or an event
        if query:
            validate_query(project, query, V.PROMPT_MAX_UNITS, None, None, None)
        reader = actor or authz.Actor.reader(project)
        authz.check_actor(reader)

        def rendered(conn: psycopg.Connection[Any], _resent: bool) -> str:
            killed, serving_model = opening(conn)  # a read, sent twice harmlessly: the connection's check
            if killed:
                return ""
            if task_id and events.effective_memory(conn, task_id, epic_id)["value"] == "off":
                return ""
            if query:
                hits = recall.recall(conn, project, query, V.PROMPT_MAX_UNITS, types=list(V.INJECTABLE_TYPES),
                                     actor=reader, encoder=self.encoder, serving_model=serving_model)
                shown = [{"id": h.token, "kind": h.kind, "title": h.title, "body": h.body} for h in hits]
            else:
                shown = self._bundle_units(conn, project, reader)
            block, tokens = bundle.render_prompt_block(shown)
            if task_id and tokens:
                events.record_events(conn, project, task_id, [{"token": t, "kind": "injected", "channel": "prompt"}
                                                              for t in tokens], reader.name or None)
            return block

        return self._checked_by_first_answer("prompt_block", rendered)

    def _bundle_units(self, conn: psycopg.Connection[Any], project: str, actor: authz.Actor) -> list[dict[str, Any]]:
        """The text of the stored bundle's best units that `actor` may see; the first bundle is compiled here
        (as the owner, like the asset: only project-visible units are eligible) when none is stored yet."""
        with authz.scoped(conn, actor):
            compiled = bundle.latest_bundle(conn, project)
        if compiled is None and actor.may("read", project):
            bundle.compile_bundle(conn, project)
        with authz.scoped(conn, actor):
            compiled = compiled or bundle.latest_bundle(conn, project)
            if compiled is None:
                return []
            return bundle.prompt_units(conn, project, [u["id"] for u in compiled["units"][: V.PROMPT_MAX_UNITS]])

    def bundle(self, project: str, actor: authz.Actor | None = None) -> dict[str, Any] | None:
        """The project's latest stored bundle, the one agents read, if `actor` (default: a reader of the project)
        may read the project; None before the first compile, and one with no units, marked off, under the kill
        switch."""
        project = gates.project_name(project)
        with self.connection() as conn:
            if events.killed(conn):
                return bundle.switched_off(project)
            with authz.scoped(conn, actor or authz.Actor.reader(project)):
                return bundle.latest_bundle(conn, project)

    def record_events(self, project: str, task_id: str, items: list[dict[str, Any]],
                      persona: str | None = None) -> int:
        """Record injected/read/cited/followed events; one row per (task, unit, kind) under any concurrency; as
        recall reads, only units private to none or to `persona`; none (0) under the kill switch."""
        with self.connection() as conn:
            return events.record_events(conn, project, task_id, items, persona)

    def cite_from_text(self, project: str, task_id: str, text: str, persona: str | None = None) -> list[str]:
        """Record `cited` events for the mem-<n> tokens of this project found in an agent's output, of units
        private to none or to `persona`; none ([]) under the kill switch."""
        with self.connection() as conn:
            return events.cite_from_text(conn, project, task_id, text, persona)

    def effective_memory(self, task_id: str, epic_id: str | None = None) -> dict[str, Any]:
        """Whether memory is on for a task (task → epic → default; kill switch; holdout), recorded per task."""
        with self.connection() as conn:
            return events.effective_memory(conn, task_id, epic_id)

    def set_switch(self, scope: str, key: str, value: str) -> None:
        """Turn memory on or off for a scope (global kill switch, epic or task), so a rollout can be undone."""
        with self.connection() as conn:
            events.set_switch(conn, scope, key, value)

    def compile_bundle(self, project: str) -> dict[str, Any]:
        """Compile a project's bundle now instead of waiting for its asset to materialise."""
        with self.connection() as conn:
            return bundle.compile_bundle(conn, project)

    def unit(self, project: str, token: str, actor: authz.Actor | None = None) -> dict[str, Any] | None:
        """The unit `mem-<n>` of a project with the sources `actor` may see (default: a reader of the project
        naming no persona), or None when there is none it may see."""
        with self.connection() as conn, authz.scoped(conn, actor or authz.Actor.reader(project)):
            return units.unit(conn, project, token)

    def stats(self, project: str | None = None, actor: authz.Actor | None = None) -> dict[str, Any]:
        """Units by status and kind, rejections by reason, of what `actor` may see (default: a reader of the
        project, or of every project when none is named, naming no persona)."""
        with self.connection() as conn, authz.scoped(conn, actor or self._default_reader(conn, project)):
            return units.stats(conn, project)

    def projects(self) -> list[str]:
        """Every project's name, so a summary over all projects can be scoped to them."""
        with self.connection() as conn:
            return units.projects(conn)

    def _default_reader(self, conn: psycopg.Connection[Any], project: str | None) -> authz.Actor:
        """A reader of the named project, or of every project for a summary that names none."""
        if project is not None:
            return authz.Actor.reader(project)
        return authz.Actor.readers(tuple(units.projects(conn)))

    def correct(self, project: str, token: str, *, title: str | None = None, body: str | None = None,
                keywords: list[str] | None = None, actor: str = "api") -> int:
        """Fix a unit's wording in place; returns the new revision (its old vectors stop being served at once)."""
        with self.connection() as conn:
            return capture.correct(conn, project, token, title=title, body=body, keywords=keywords, actor=actor)

    def review_queue(self, project: str | None = None, actor: authz.Actor | None = None) -> list[dict[str, Any]]:
        """Units waiting in review that `actor` may see (default as in `stats`), with the unit each conflicts with
        (empty where the reader may not see that one)."""
        with self.connection() as conn, authz.scoped(conn, actor or self._default_reader(conn, project)):
            return curation.review_queue(conn, project)

    def decide(self, project: str, token: str, decision: str, target: str | None = None,
               actor: str = "reviewer") -> dict[str, Any]:
        """Approve, reject or supersede (target = the replaced unit's token) a unit in review; audited."""
        with self.connection() as conn:
            return curation.decide(conn, project, token, decision, target, actor=actor)

    def serving_model(self) -> str:
        """The model key recall serves, as every worker reads it from the database."""
        with self.connection() as conn:
            return embeddings.serving_model(conn)

    def embedding_model(self, model_key: str | None = None) -> str:
        """The registered model key to embed with: the one asked for (checked), else the serving model."""
        if model_key is None:
            return self.serving_model()
        return embeddings.model_spec(model_key).key

    def embed_changes(self, model_key: str, progress: Callable[[int], None] | None = None) -> dict[str, int]:
        """Embed the units changed since this model's journal cursor (resumable); progress gets each page's size."""
        embedder = embeddings.embedder_for(model_key)
        with self.connection() as conn:
            return embeddings.embed_changes(conn, embedder, progress=progress)

    def days_with_units(self) -> list[date]:
        """UTC creation days that hold embeddable units: the partitions an embedding backfill covers."""
        with self.connection() as conn:
            return embeddings.days_with_units(conn)

    def embedding_coverage(self, model_key: str) -> dict[str, Any]:
        """How many active units have a vector of the model at their current revision."""
        with self.connection() as conn:
            return embeddings.coverage(conn, model_key)

    def set_serving_model(self, model_key: str, actor: str = "operator") -> None:
        """Switch the model recall serves; vectors of other models stay until dropped."""
        with self.connection() as conn:
            embeddings.set_serving_model(conn, model_key, actor)

    def register_canon(self, project: str, path: str, text: str) -> int:
        """Register a canon document so candidates that merely restate it are rejected."""
        with self.connection() as conn:
            return canon.register_canon(conn, project, path, text)


def connect(database_url: str | None = None, home: str | None = None, pool_size: int = V.POOL_MAX_SIZE) -> Memory:
    """Open memory on DATABASE_URL (or the argument), else on the embedded server under MEMORY_ASSETS_HOME."""
    tracing.configure("api")  # OTLP export when OTEL_EXPORTER_OTLP_ENDPOINT is set; once per process
    url = database.database_url(database_url, home)
    database.migrate(url)
    return Memory(database.open_pool(url, max_size=pool_size), url)
