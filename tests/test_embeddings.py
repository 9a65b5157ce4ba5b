"""Version-bound vectors on the real model and database: corrections, forget, the journal, two models."""

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import psycopg
import pytest

from memory_assets import authz, embeddings, gates, journal, lifecycle
from memory_assets import vocabulary as V
from memory_assets.database import connection_kwargs
from memory_assets.errors import ValidationError
from tests.cases import REPO, T1, T2, indexes_at_each_write, without_model_index

FACT = dict(kind="env", type="semantic", title="Staging database requires TLS",
            body="The staging PostgreSQL only accepts connections with sslmode=require.")


def served_vector(conn, unit_id, model=T1):
    """The vector reads would serve: bound to the unit's current revision and content."""
    row = conn.execute("SELECT e.embedding FROM memory_embeddings e JOIN memory_units u ON u.id = e.unit_id "
                       "AND e.unit_revision = u.revision AND e.content_hash = u.content_hash "
                       "WHERE e.unit_id = %s AND e.model_key = %s", (unit_id, model)).fetchone()
    return None if row is None else row[0].to_numpy()


def test_vectors_are_normalised_and_bound_to_revision(mem, conn, embedder):
    unit_id = mem.remember(project="acme", **FACT).unit_id
    units = embeddings.stale_units(conn, T1, unit_ids=[unit_id])
    assert embeddings.embed_units(conn, embedder, units) == 1
    vector = served_vector(conn, unit_id)
    assert vector.shape == (384,) and abs(np.linalg.norm(vector) - 1) < 1e-4
    assert embeddings.stale_units(conn, T1, unit_ids=[unit_id]) == []
    assert mem.correct("acme", "mem-1",
                       body="The staging PostgreSQL only accepts TLS connections (sslmode=require).") == 2
    assert served_vector(conn, unit_id) is None  # the old vector is ignored at once
    assert [u[1] for u in embeddings.stale_units(conn, T1, unit_ids=[unit_id])] == [2]


def test_a_page_written_batch_by_batch_binds_every_vector_to_its_own_unit(mem, conn, embedder):
    """embed_units encodes in length order and commits each batch on a writer thread: no vector may land on
    another unit, and the count written is every unit's."""
    ids = [mem.remember(project="acme", kind="env", type="semantic", title=f"Port rule {i}",
                        body="Service " + "very " * (7 * i % 11) + f"{i} listens on port {9000 + i}.").unit_id
           for i in range(7)]
    small_batches = embeddings.Embedder(embedder.spec, batch_size=2)
    units = embeddings.stale_units(conn, T1, unit_ids=ids)
    assert embeddings.embed_units(conn, small_batches, units) == 7
    texts = dict(zip((str(unit[0]) for unit in units), embeddings.texts_of(embedder.spec, units), strict=True))
    for unit_id in ids:
        alone = embedder.encode([texts[unit_id]])[0]
        assert float(served_vector(conn, unit_id) @ alone) > 0.9999
    assert embeddings.stale_units(conn, T1, unit_ids=ids) == []


def test_a_failed_batch_write_stops_the_page_and_surfaces(mem, conn, embedder, monkeypatch):
    """One batch is in flight at a time: when its write fails, the error comes back before another batch is
    queued, and nothing after it is written."""
    ids = [mem.remember(project="acme", kind="env", type="semantic", title=f"Port rule {i}",
                        body=f"Service {i} listens on port {9000 + i}.").unit_id for i in range(6)]
    small_batches = embeddings.Embedder(embedder.spec, batch_size=2)
    encoded = []
    real_encode = small_batches.encode
    monkeypatch.setattr(small_batches, "encode", lambda texts: encoded.append(len(texts)) or real_encode(texts))

    def broken_write(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(embeddings, "write_vectors", broken_write)
    with pytest.raises(RuntimeError, match="disk full"):
        embeddings.embed_units(conn, small_batches, embeddings.stale_units(conn, T1, unit_ids=ids))
    assert encoded == [2, 2]  # the third batch is never encoded
    assert len(embeddings.stale_units(conn, T1, unit_ids=ids)) == 6


def test_a_correction_racing_an_inflight_embedding_never_leaves_the_old_vector_served(mem, conn, clean, embedder):
    import psycopg

    unit_id = mem.remember(project="acme", **FACT).unit_id
    units = embeddings.stale_units(conn, T1, unit_ids=[unit_id])   # the embedder read revision 1 ...
    texts = embeddings.texts_of(embedder.spec, units)
    vectors = embedder.encode(texts)                                 # ... and is still computing
    conn.commit()
    with psycopg.connect(clean) as corrector:                      # a second connection corrects meanwhile
        corrector.execute("UPDATE memory_units SET body = 'Staging accepts only sslmode=require connections.' "
                          "WHERE id = %s", (unit_id,))
        written = {}
        writer = threading.Thread(target=lambda: written.setdefault(
            "n", embeddings.write_vectors(conn, embedder.spec, units, texts, vectors)))
        writer.start()                                               # blocks on the correction's row lock
        writer.join(timeout=1)
        assert writer.is_alive()
        corrector.commit()
    writer.join(timeout=30)
    assert written["n"] == 0                                         # the stale vector was not committed
    assert served_vector(conn, unit_id) is None
    units = embeddings.stale_units(conn, T1, unit_ids=[unit_id])
    assert embeddings.embed_units(conn, embedder, units) == 1
    text = conn.execute("SELECT body FROM memory_units WHERE id = %s", (unit_id,)).fetchone()[0]
    digest = conn.execute("SELECT text_digest FROM memory_embeddings WHERE unit_id = %s", (unit_id,)).fetchone()[0]
    assert digest == embeddings.digest(embeddings.embedding_text("t1", FACT["title"], text, []))


def test_forget_removes_the_vectors_in_the_same_transaction(mem, conn, embedder):
    unit_id = mem.remember(project="acme", **FACT).unit_id
    embeddings.embed_units(conn, embedder, embeddings.stale_units(conn, T1, unit_ids=[unit_id]))
    lifecycle.forget(conn, "acme", "mem-1", authz.Actor.for_project("acme", forget=True), reason="asked")
    assert conn.execute("SELECT count(*) FROM memory_embeddings").fetchone()[0] == 0
    assert embeddings.stale_units(conn, T1) == []  # a tombstone is never embedded again


def test_journal_pages_resume_and_deleted_rows_still_advance(mem, conn):
    for i in range(5):
        mem.remember(project="acme", kind="env", type="semantic", title=f"Fact {i}",
                     body=f"Service {i} needs port {9000 + i} because the proxy maps it.")
    first = journal.page(conn, "test", limit=3)
    assert [c.change for c in first] == ["insert"] * 3
    journal.advance(conn, "test", first[-1])
    conn.commit()
    conn.execute("DELETE FROM memory_sources WHERE unit_id = (SELECT id FROM memory_units WHERE number = 5)")
    conn.execute("UPDATE memory_inbox SET unit_id = NULL "
                 "WHERE unit_id = (SELECT id FROM memory_units WHERE number = 5)")
    conn.execute("DELETE FROM memory_units WHERE number = 5")
    conn.commit()
    rest = journal.page(conn, "test", limit=100)
    assert [c.change for c in rest] == ["insert", "insert", "delete"]
    journal.advance(conn, "test", rest[-1])
    conn.commit()
    assert journal.page(conn, "test") == []


def test_a_bulk_fold_journals_each_unit_it_inserts_once_and_an_update_still_per_row(mem, conn):
    """Inserts are journaled per statement (one INSERT from the transition table, not a plpgsql call per unit):
    every unit of a batch has its one 'insert' row, a replayed batch adds none, and a status change its 'update'."""
    batch = [gates.validate(project="acme", kind="env", type="semantic", title=f"Fact {i}",
                            body=f"Service {i} needs port {9000 + i} because the proxy maps it.") for i in range(40)]
    assert mem.remember_many(batch)["inserted"] == 40
    assert mem.remember_many(batch)["inserted"] == 0
    journaled = conn.execute("SELECT c.unit_id, c.revision, c.status, c.change, c.project FROM memory_changes c "
                             "ORDER BY c.seq").fetchall()
    units = conn.execute("SELECT id, revision, status, 'insert', project FROM memory_units").fetchall()
    assert sorted(journaled) == sorted(units) and len(journaled) == 40
    conn.execute("UPDATE memory_units SET status = 'stale' WHERE number <= 3")
    conn.commit()
    changes = [c.change for c in journal.page(conn, "test", limit=100)]
    assert changes == ["insert"] * 40 + ["update"] * 3
    assert conn.execute("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'memory_units'::regclass "
                        "AND tgname LIKE 'memory_units_journal%' AND tgtype & 1 = 0").fetchone()[0] == 1


def test_embed_changes_follows_the_journal(mem, conn, embedder):
    mem.remember(project="acme", **FACT)
    assert embeddings.embed_changes(conn, embedder) == {"changes": 1, "embedded": 1}
    assert embeddings.embed_changes(conn, embedder) == {"changes": 0, "embedded": 0}
    mem.correct("acme", "mem-1", title="Staging DB requires TLS")
    assert embeddings.embed_changes(conn, embedder) == {"changes": 1, "embedded": 1}


def model_indexes(conn, prefix):
    return conn.execute("SELECT c.relname, c.reloptions FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                        "WHERE i.indrelid = 'memory_embeddings'::regclass AND starts_with(c.relname, %s)",
                        (prefix,)).fetchall()


def earlier_index(conn, model):
    """The model's index as releases before the graph parameters built it: pgvector's defaults, the bare prefix."""
    spec = embeddings.model_spec(model)
    prefix = embeddings.model_index_prefix(spec)
    conn.execute(f"DROP INDEX IF EXISTS {embeddings.model_index_name(spec)}")
    conn.execute(f"CREATE INDEX IF NOT EXISTS {prefix} ON memory_embeddings USING hnsw "
                 f"((embedding::vector({spec.dim})) vector_cosine_ops) WHERE model_key = '{model}'")
    conn.commit()
    return prefix


def test_an_hnsw_index_built_under_other_graph_parameters_is_replaced_once(mem, conn, embedder):
    """A store whose model index predates the vocabulary's m and ef_construction (pgvector's defaults, named by the
    bare prefix) gets it rebuilt at the next embedding run: one index for the model afterwards, with the
    vocabulary's parameters, which the HNSW walk uses; a second run builds nothing."""
    spec = embeddings.model_spec(T1)
    prefix = earlier_index(conn, T1)
    current = embeddings.model_index_name(spec)
    mem.remember(project="acme", **FACT)
    assert embeddings.embed_changes(conn, embedder) == {"changes": 1, "embedded": 1}
    expected = [(current, [f"m={V.HNSW_M}", f"ef_construction={V.HNSW_EF_CONSTRUCTION}"])]
    assert model_indexes(conn, prefix) == expected
    oid = conn.execute("SELECT %s::regclass::oid", (current,)).fetchone()[0]
    embeddings.ensure_model_index(conn, spec)
    assert model_indexes(conn, prefix) == expected
    assert conn.execute("SELECT %s::regclass::oid", (current,)).fetchone()[0] == oid
    assert index_scans_of_a_walk(conn, spec, "acme") == {current: 1}


def index_scans_of_a_walk(conn, spec, project):
    """The scans of the model's indexes by one call of recall's HNSW walk (sql/029), counted in its transaction."""
    query = np.ones(spec.dim, dtype=np.float32) / np.sqrt(spec.dim)
    with conn.transaction():
        walked = conn.execute("SELECT unit_id, distance FROM memory_hnsw_walk(%s, %s, %s, %s::vector, 10, 1000000, 0)",
                              (project, spec.key, spec.dim, query)).fetchall()
        assert walked, "the walk found no vector"
        scans = dict(conn.execute("SELECT c.relname, pg_stat_get_xact_numscans(c.oid) FROM pg_class c "
                                  "WHERE c.relkind = 'i' AND starts_with(c.relname, %s)",
                                  (embeddings.model_index_prefix(spec),)))
    return {name: count for name, count in scans.items() if count}


def test_a_store_upgraded_from_a_full_precision_graph_walks_it_until_the_new_one_is_built(mem, conn, embedder):
    """sql/029 marks a model whose index is an earlier release's graph of full-precision vectors: the walk reads that
    index, not a sort of the project's every vector, until the model's next embedding run has built the
    half-precision graph, which clears the mark once the new graph stands."""
    spec = embedder.spec
    mem.remember(project="acme", **FACT)
    embeddings.embed_changes(conn, embedder)
    prefix = earlier_index(conn, T1)  # the store as the release before left it
    conn.execute((REPO / "sql" / "029_hnsw_walk_halfvec.sql").read_text())
    conn.commit()
    assert index_scans_of_a_walk(conn, spec, "acme") == {prefix: 1}
    embeddings.ensure_model_index(conn, spec)
    assert index_scans_of_a_walk(conn, spec, "acme") == {embeddings.model_index_name(spec): 1}
    assert conn.execute("SELECT count(*) FROM memory_settings WHERE starts_with(key, %s)",
                        (V.SETTING_HNSW_EARLIER_GRAPH,)).fetchone()[0] == 0


def test_the_walk_orders_by_the_graphs_half_precision_copies_and_returns_exact_distances(mem, conn, embedder):
    """The graph holds half-precision copies (HNSW_GRAPH_TYPE) and the walk reads them through the index, but the
    distance it returns is the stored vector's to the full question, so the fusion ranks by the model's own vectors."""
    spec = embeddings.model_spec(T1)
    for i in range(3):
        mem.remember(project="acme", **{**FACT, "title": f"{FACT['title']} {i}", "body": f"{FACT['body']} ({i})"})
    embeddings.embed_changes(conn, embedder)
    assert index_scans_of_a_walk(conn, spec, "acme") == {embeddings.model_index_name(spec): 1}
    question = embedder.encode(["which database needs TLS?"])[0]
    walked = conn.execute("SELECT w.distance, e.embedding <=> %(q)s::vector, "
                          "e.embedding::halfvec(384) <=> %(q)s::vector::halfvec(384) "
                          "FROM memory_hnsw_walk('acme', %(model)s, 384, %(q)s::vector, 10, 1000000, 0) AS w "
                          "JOIN memory_embeddings e ON e.unit_id = w.unit_id AND e.model_key = %(model)s",
                          {"q": question, "model": T1}).fetchall()
    assert len(walked) == 3
    assert all(distance == exact for distance, exact, _ in walked), walked
    assert any(exact != half for _, exact, half in walked), walked  # else this test could not tell them apart
    conn.rollback()


def test_a_models_first_vectors_go_in_before_its_graph_which_is_built_once_after_the_last_day(
        mem, conn, embedder, monkeypatch, today):
    """A model with no HNSW index yet (a new store, a new model's backfill) writes its vectors without one and builds
    the graph over them after the run's last day (one build instead of an insert per vector); from then on every
    run writes into the graph, which the walk reads."""
    spec = embedder.spec
    without_model_index(conn, spec)
    for i in range(3):
        mem.remember(project="acme", **{**FACT, "title": f"{FACT['title']} {i}", "body": f"{FACT['body']} ({i})"})
    yesterday = today - timedelta(days=1)
    conn.execute("UPDATE memory_units SET created_at = created_at - interval '1 day' WHERE number = 1")
    conn.commit()
    seen = indexes_at_each_write(monkeypatch, spec)
    assert embeddings.embed_days(conn, embedder, [yesterday, today]) == {"embedded": 3, "written": 3}
    assert seen == [[], []]  # one batch a day, neither into a graph
    assert embeddings.model_indexes(conn, embeddings.model_index_prefix(spec)) == [embeddings.model_index_name(spec)]
    assert index_scans_of_a_walk(conn, spec, "acme") == {embeddings.model_index_name(spec): 1}
    mem.remember(project="acme", **{**FACT, "title": "Production database requires TLS"})
    assert embeddings.embed_day(conn, embedder, today)["written"] == 1
    assert seen[-1] == [embeddings.model_index_name(spec)]


def waits_for_a_lock(conn, other):
    """Whether another connection's statement is waiting for a lock (a table's, or a transaction's end)."""
    return conn.execute("SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
                        (other.info.backend_pid,)).fetchone()[0]


def runs_a_statement(conn, pid):
    """Whether a backend is running a statement now."""
    return conn.execute("SELECT count(*) > 0 FROM pg_stat_activity WHERE pid = %s AND state = 'active'",
                        (pid,)).fetchone()[0]


def wait_until(condition, seconds=10.0):
    """Whether a condition came true within the time, asked every 50 ms."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_models_graph_is_built_while_vector_writes_go_on(mem, conn, clean, embedder, today):
    """The build is concurrent: while it waits for a write in flight when it started, another run's vectors still go
    in at once (a plain CREATE INDEX queued them behind its lock, for the whole build at 1M: ~9 min), and once that
    write is done the graph stands and the walk reads it."""
    spec = embedder.spec
    name = embeddings.model_index_name(spec)
    without_model_index(conn, spec)
    mem.remember(project="acme", **FACT)
    with psycopg.connect(clean, **connection_kwargs()) as builder_conn, \
            psycopg.connect(clean, **connection_kwargs()) as inflight:
        builder = threading.Thread(target=embeddings.ensure_model_index, args=(builder_conn, spec))
        try:
            with inflight.transaction():
                inflight.execute("LOCK TABLE memory_embeddings IN ROW EXCLUSIVE MODE")  # a write not yet committed
                builder.start()
                assert wait_until(lambda: waits_for_a_lock(conn, builder_conn))
                conn.execute("SET lock_timeout = '2s'")  # a write that queued behind the build would fail here
                assert embeddings.embed_units(conn, embedder, embeddings.stale_units(conn, T1, day=today)) == 1
                conn.execute("RESET lock_timeout")
                assert builder.is_alive()
        finally:
            builder.join(timeout=60)  # the write in flight ended with the block: the build goes on to its end
    assert not builder.is_alive()
    assert embeddings.model_indexes(conn, embeddings.model_index_prefix(spec)) == [name]
    assert index_scans_of_a_walk(conn, spec, "acme") == {name: 1}


def build_locks_held(conn):
    """The HNSW build locks any session holds (the advisory lock's key is hashtext of HNSW_BUILD_LOCK)."""
    return conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                        "AND objid = (hashtext(%s)::bigint & 4294967295)::oid",
                        (V.HNSW_BUILD_LOCK,)).fetchone()[0]


def a_failed_build(conn, clean, spec, *, late: bool) -> None:
    """A concurrent build of the model's index stopped by its lock timeout: early, waiting for a write in flight (its
    index left invalid, not yet written into), or late, waiting for a transaction's older snapshot (its index left
    invalid but ready: every insert still goes into it)."""
    with psycopg.connect(clean, **connection_kwargs()) as other, other.transaction():
        if late:
            other.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            other.execute("SELECT count(*) FROM memory_units").fetchone()  # its snapshot stands to commit
        else:
            other.execute("LOCK TABLE memory_embeddings IN ROW EXCLUSIVE MODE")
        conn.execute("SET lock_timeout = '300ms'")
        try:
            with pytest.raises(psycopg.errors.LockNotAvailable):
                embeddings.ensure_model_index(conn, spec)
        finally:
            conn.execute("RESET lock_timeout")


@pytest.mark.parametrize("late", [False, True], ids=["early", "late"])
def test_a_build_that_failed_leaves_an_invalid_index_that_the_next_run_drops_before_writing(
        mem, conn, clean, embedder, monkeypatch, today, late):
    """A concurrent build stopped midway (here by its lock timeout; a cancel or a crash alike) leaves its index
    behind, invalid: no run takes it for the graph, the build lock is free again, and the model's next run drops it
    before writing its vectors (one that failed late is still written into), then builds the graph over them, which
    the walk reads."""
    spec = embedder.spec
    prefix, name = embeddings.model_index_prefix(spec), embeddings.model_index_name(spec)
    without_model_index(conn, spec)
    mem.remember(project="acme", **FACT)
    a_failed_build(conn, clean, spec, late=late)
    assert embeddings.model_indexes(conn, prefix) == []
    assert embeddings.model_indexes(conn, prefix, valid=False) == [name]
    ready = conn.execute("SELECT indisready FROM pg_index WHERE indexrelid = %s::regclass", (name,)).fetchone()[0]
    assert ready == late
    assert build_locks_held(conn) == 0
    seen = indexes_at_each_write(monkeypatch, spec)
    assert embeddings.embed_day(conn, embedder, today)["written"] == 1
    assert seen == [[]]  # into no graph, the leftover dropped first
    assert embeddings.model_indexes(conn, prefix) == [name]
    assert embeddings.model_indexes(conn, prefix, valid=False) == []
    assert index_scans_of_a_walk(conn, spec, "acme") == {name: 1}


def test_a_failed_builds_index_that_a_busy_table_keeps_is_left_for_the_next_run(mem, conn, clean, embedder):
    """Dropping a failed build's index waits for every transaction using the table, while the build lock is held: it
    gives up after INDEX_DROP_LOCK_TIMEOUT_MS (the caller's own lock timeout put back), builds nothing, frees the
    lock, and the next run drops it and builds."""
    spec = embedder.spec
    prefix, name = embeddings.model_index_prefix(spec), embeddings.model_index_name(spec)
    without_model_index(conn, spec)
    a_failed_build(conn, clean, spec, late=False)
    conn.execute("SET lock_timeout = '7s'")
    with psycopg.connect(clean, **connection_kwargs()) as reader, reader.transaction():
        reader.execute("SELECT count(*) FROM memory_embeddings").fetchone()
        embeddings.ensure_model_index(conn, spec)
        assert embeddings.model_indexes(conn, prefix, valid=False) == [name]
    assert conn.execute("SHOW lock_timeout").fetchone()[0] == "7s"
    conn.execute("RESET lock_timeout")
    assert build_locks_held(conn) == 0
    embeddings.ensure_model_index(conn, spec)
    assert embeddings.model_indexes(conn, prefix) == [name]
    assert embeddings.model_indexes(conn, prefix, valid=False) == []


class RunTerminated(BaseException):
    """What Dagster raises in a run it terminates: no KeyboardInterrupt, so psycopg cancels nothing by itself."""


def test_a_build_interrupted_by_a_terminated_run_is_cancelled_on_the_server(mem, conn, clean, embedder):
    """A run terminated while its build waits (the signal's handler raising, as Dagster's does) leaves no build
    running on the server and no build lock held, and the next run drops the leftover and builds."""
    spec = embedder.spec
    prefix, name = embeddings.model_index_prefix(spec), embeddings.model_index_name(spec)
    without_model_index(conn, spec)
    sent = threading.Event()

    def terminate(*_: object) -> None:
        raise RunTerminated()

    with psycopg.connect(clean, **connection_kwargs()) as builder_conn, \
            psycopg.connect(clean, **connection_kwargs()) as watcher, \
            psycopg.connect(clean, **connection_kwargs()) as inflight, inflight.transaction():
        inflight.execute("LOCK TABLE memory_embeddings IN ROW EXCLUSIVE MODE")  # the build waits for it
        builder_conn.execute("SET lock_timeout = '20s'")  # should no signal come, the build fails, never hangs
        builder_pid = builder_conn.info.backend_pid

        def terminate_once_the_build_waits() -> None:
            if wait_until(lambda: waits_for_a_lock(watcher, builder_conn)):
                sent.set()
                os.kill(os.getpid(), signal.SIGUSR1)

        signaller = threading.Thread(target=terminate_once_the_build_waits)
        previous = signal.signal(signal.SIGUSR1, terminate)
        try:
            signaller.start()
            with pytest.raises(RunTerminated):
                embeddings.ensure_model_index(builder_conn, spec)
        finally:
            signaller.join()
            signal.signal(signal.SIGUSR1, previous)
        assert sent.is_set()
        # the write in flight still stands: only a cancel ends the build before it
        assert wait_until(lambda: not runs_a_statement(conn, builder_pid))
    assert build_locks_held(conn) == 0
    embeddings.ensure_model_index(conn, spec)
    assert embeddings.model_indexes(conn, prefix) == [name]
    assert embeddings.model_indexes(conn, prefix, valid=False) == []


def test_an_index_build_refuses_to_run_in_a_transaction(conn, embedder):
    """A concurrent build cannot run in a transaction: asked to, it says so before taking the build lock, which a
    pooled connection would otherwise keep after its rollback."""
    without_model_index(conn, embedder.spec)
    with conn.transaction(), pytest.raises(RuntimeError, match="outside any transaction"):
        embeddings.ensure_model_index(conn, embedder.spec)
    assert build_locks_held(conn) == 0


@pytest.mark.parametrize("run", ["changes", "day"])
def test_a_run_that_fails_before_the_first_graph_leaves_it_to_the_next_run(mem, conn, embedder, monkeypatch, run,
                                                                           today):
    """A failed run of a model with no index builds none (not over part of the vectors, and no run waits on it); the
    next run writes what is left and builds it then: the sensor's run of the changes and a day's partition alike."""
    spec = embedder.spec
    without_model_index(conn, spec)
    mem.remember(project="acme", **FACT)
    seen = indexes_at_each_write(monkeypatch, spec, fail_first=True)
    embed = (lambda: embeddings.embed_changes(conn, embedder)["embedded"]) if run == "changes" else (
        lambda: embeddings.embed_day(conn, embedder, today)["written"])
    with pytest.raises(psycopg.OperationalError):
        embed()
    conn.rollback()
    assert embeddings.model_indexes(conn, embeddings.model_index_prefix(spec)) == []
    assert embed() == 1
    assert seen == [[], []]
    assert embeddings.model_indexes(conn, embeddings.model_index_prefix(spec)) == [embeddings.model_index_name(spec)]


def test_runs_that_find_earlier_hnsw_indexes_together_build_each_new_one_once(clean, conn):
    """A backfill's runs may start together on a store built under other parameters, of one model or of two: each
    waits for the build before it, then finds its index; none fails (two drops waiting on each other's build would
    deadlock) and each model is left with its one index."""
    prefixes = {model: earlier_index(conn, model) for model in (T1, T2)}
    start, errors = threading.Barrier(4), []

    def run(model: str) -> None:
        try:
            with psycopg.connect(clean, **connection_kwargs()) as own:
                start.wait()
                embeddings.ensure_model_index(own, embeddings.model_spec(model))
        except Exception as error:
            errors.append(error)

    runners = [threading.Thread(target=run, args=(model,)) for model in (T1, T1, T2, T2)]
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join()
    assert errors == []
    for model, prefix in prefixes.items():
        current = embeddings.model_index_name(embeddings.model_spec(model))
        assert [name for name, _ in model_indexes(conn, prefix)] == [current]


def test_a_replaced_index_waits_for_no_reader_and_goes_at_the_next_run(clean, conn):
    """The earlier index is dropped only if the table's lock comes within INDEX_DROP_LOCK_TIMEOUT_MS: a reader in a
    long transaction leaves both indexes (requests never queue behind the drop) and the next run drops it."""
    prefix = earlier_index(conn, T1)
    current = embeddings.model_index_name(embeddings.model_spec(T1))
    with psycopg.connect(clean, **connection_kwargs()) as reader, reader.transaction():
        reader.execute("SELECT count(*) FROM memory_embeddings").fetchone()
        embeddings.ensure_model_index(conn, embeddings.model_spec(T1))
        assert sorted(name for name, _ in model_indexes(conn, prefix)) == [prefix, current]
    embeddings.ensure_model_index(conn, embeddings.model_spec(T1))
    assert [name for name, _ in model_indexes(conn, prefix)] == [current]


def test_a_run_that_finds_its_index_takes_no_lock_on_the_vectors(clean, conn):
    """Every embedding run checks its model's index first: once it stands, the check reads the catalog only, so a
    run never waits for another run's vector writes in flight (CREATE INDEX IF NOT EXISTS locks the table first)."""
    spec = embeddings.model_spec(T1)
    embeddings.ensure_model_index(conn, spec)
    with psycopg.connect(clean, **connection_kwargs()) as writer, writer.transaction():
        writer.execute("LOCK TABLE memory_embeddings IN ROW EXCLUSIVE MODE")
        conn.execute("SET lock_timeout = '2s'")
        embeddings.ensure_model_index(conn, spec)
        conn.execute("RESET lock_timeout")


def test_serving_model_is_a_database_setting(mem):
    assert mem.serving_model() == V.DEFAULT_SERVING_MODEL
    mem.set_serving_model(T2)
    assert mem.serving_model() == T2
    with pytest.raises(Exception, match="unknown model key"):
        mem.set_serving_model("nope@1")


QUERIES = ["What did Caroline research?", "When did Melanie paint a sunrise?", "staging postgres sslmode",
           "Which city did Jon take pottery classes in on 2 June, 2023?", "x"]
PASSAGES = ["Caroline researched adoption agencies last week.", "Melanie painted a sunrise over the lake in 2022.",
            "The staging PostgreSQL only accepts connections with sslmode=require.",
            "Jon started pottery classes in Leeds on Tuesdays.", "The cafeteria serves soup on Fridays."]


def test_the_onnx_query_encoder_gives_torchs_vectors_and_lives_in_the_home(embedder):
    """Queries go through an ONNX export of the same weights: torch's unit vectors (to float precision), alone or in
    a padded batch; the export is written under the project's home, never into the repository."""
    onnx = embeddings.query_encoder(T1)
    assert isinstance(onnx, embeddings.OnnxEncoder)
    path = embeddings.onnx_file(embeddings.model_spec(T1))
    assert path.exists() and path.is_relative_to(embeddings.memory_home())
    torch = embeddings.Embedder(embeddings.model_spec(T1), backend="torch")
    ours, theirs = onnx.encode(QUERIES), torch.encode(QUERIES)
    assert ours.shape == theirs.shape == (len(QUERIES), 384) and ours.dtype == np.float32
    assert np.allclose(np.linalg.norm(ours, axis=1), 1, atol=1e-4)
    assert min(float(a @ b) for a, b in zip(ours, theirs, strict=True)) > 0.9999
    stored = torch.encode(PASSAGES)
    assert list((ours @ stored.T)[:4].argmax(axis=1)) == list((theirs @ stored.T)[:4].argmax(axis=1)) == [0, 1, 2, 3]
    one_by_one = np.stack([onnx.encode([q])[0] for q in QUERIES])  # a query alone, or padded in a batch
    assert np.allclose(one_by_one, ours, atol=1e-4)
    vector = embeddings.encode_query(T1, QUERIES[0])
    assert not vector.flags.writeable and np.allclose(vector, ours[0], atol=1e-5)


def test_a_question_runs_on_its_own_one_thread_session_and_documents_keep_theirs(embedder):
    """A question's few tokens gain nothing from a second thread, whose idle spinning slows whatever runs next: the
    query encoder has its own session on QUERY_ENCODER_THREADS, the embedding stage keeps EMBED_THREADS, and both
    give the same vectors."""
    query, document = embeddings.query_encoder(T1), embedder.onnx
    assert query is not document
    assert query.session.get_session_options().intra_op_num_threads == V.QUERY_ENCODER_THREADS == 1
    assert document.session.get_session_options().intra_op_num_threads == V.EMBED_THREADS > 1
    assert np.allclose(query.encode(QUERIES), document.encode(QUERIES), atol=1e-5)


def test_stored_vectors_are_torchs_through_the_onnx_export_in_any_batch_order(embedder):
    """Documents go through the fp32 export in length-sorted batches, put back in order: torch's vectors."""
    assert embedder.backend == "onnx-fp32"
    texts = PASSAGES + QUERIES + ["a", "a much longer text about the release train, cut on Thursday mornings UTC"]
    torch = embeddings.Embedder(embeddings.model_spec(T1), backend="torch").encode(texts)
    small_batches = embeddings.Embedder(embeddings.model_spec(T1), batch_size=3).encode(texts)
    assert small_batches.shape == torch.shape and small_batches.dtype == np.float32
    assert float(np.abs(small_batches - torch).max()) < 1e-5
    assert np.allclose(embedder.encode(texts[::-1]), small_batches[::-1], atol=1e-6)
    with pytest.raises(ValidationError, match="document_encoder"):
        embeddings.Embedder(embeddings.model_spec(T1), backend="onnx-int8")  # stored vectors are the model's own


def test_an_embedding_run_never_imports_torch():
    """What lets a sensor's run start at once: the definitions and the document encoder load without torch."""
    script = ("import sys\nimport memory_assets.definitions\nfrom memory_assets import embeddings\n"
              f"vector = embeddings.embedder_for({T1!r}).encode(['one fact'])[0]\n"
              "print(len(vector), 'torch' in sys.modules, 'sentence_transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         env={**os.environ, "MEMORY_ASSETS_HOME": str(embeddings.memory_home())}).stdout
    assert out.split() == ["384", "False", "False"]


def test_the_query_encoder_falls_back_to_torch_without_onnxruntime(monkeypatch):
    monkeypatch.setattr(embeddings, "_QUERY_ENCODERS", {})
    monkeypatch.setattr(embeddings, "_ONNX_ENCODERS", {})
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime raises ImportError
    monkeypatch.setattr(embeddings, "onnx_file", lambda spec, precision: Path("/nonexistent/model.onnx"))
    encoder = embeddings.query_encoder(T1)
    assert isinstance(encoder, embeddings.Embedder) and encoder.backend == "torch"
    assert embeddings.embedder_for(T1).backend == "torch"  # stored vectors too
    assert isinstance(embeddings.query_encoder(T1, "torch"), embeddings.Embedder)
    with pytest.raises(ValidationError, match="query_encoder"):
        embeddings.query_encoder(T1, "tensorrt")
