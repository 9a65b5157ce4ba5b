"""Recall latency at 10k and 100k units in one project, next to numpy brute force over the same vectors and filter."""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import median, percentile, scratch_memory, write_result
from bench.ingest import candidates
from memory_assets import authz, database, embeddings
from memory_assets import vocabulary as V
from memory_assets.database import query
from memory_assets.ledger import capture
from memory_assets.recall import legs, request

MODEL = V.DEFAULT_SERVING_MODEL
DIM = V.EMBEDDING_MODELS[MODEL]["dim"]
EF_SWEEP = (100, 200, 300, 400)  # the HNSW path at fixed ef_search values, next to the size-scaled default


def clustered_vectors(n: int, rng: np.random.Generator) -> np.ndarray:
    """n unit vectors around 64 random centres, near-random within each: the scale curve's synthetic vectors, whose
    exact top 10 beyond the first is a near-tie among a cluster's members (HNSW's hard case, docs/scaling.md item
    14)."""
    centres = rng.standard_normal((64, DIM)).astype(np.float32)
    vectors = centres[rng.integers(0, 64, n)] + 0.6 * rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def whole_index_in_memory(vectors: int) -> str:
    """The setting that keeps a build's whole index in memory (~2 kB a 384-d vector in an HNSW graph): at 1M units a
    1 GB budget was full at about half the vectors and the build slowed ~6x from there."""
    return f"SET maintenance_work_mem = '{max(1024, vectors * 2560 // 2**20)}MB'"


def queries_near(stored: np.ndarray, rng: np.random.Generator, count: int) -> np.ndarray:
    """count in-distribution queries, each a stored vector plus noise: a random direction in 384-d is near nothing."""
    queries = stored[rng.integers(0, len(stored), count)]
    queries = queries + 0.05 * rng.standard_normal(queries.shape).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    return queries


def seed(mem, projects: list[str], n: int, rng: np.random.Generator) -> None:
    """n units per project through the write path; synthetic unit vectors (clustered like text) bound to their
    revisions."""
    with mem.connection() as conn:
        for project in projects:
            for start in range(0, n, 10_000):
                capture.remember_many(conn, candidates(min(10_000, n - start), project, offset=start))
        rows = conn.execute("SELECT id, project, revision, content_hash FROM memory_units WHERE project = ANY (%s)",
                            (projects,)).fetchall()
        vectors = clustered_vectors(len(rows), rng)
        with conn.cursor() as cur, cur.copy(
            "COPY memory_embeddings (unit_id, project, model_key, unit_revision, content_hash, text_digest, "
            "model_name, model_revision, dim, embedding) FROM STDIN") as copy:
            for (unit_id, project, revision, content_hash), vector in zip(rows, vectors, strict=True):
                copy.write_row((unit_id, project, MODEL, revision, content_hash, "synthetic", "synthetic", "bench",
                                DIM, vector))
        conn.execute(whole_index_in_memory(len(rows)))
        embeddings.ensure_model_index(conn, embeddings.model_spec(MODEL))
        conn.execute("ANALYZE memory_embeddings")
        database.refresh_statistics(conn, V.UNITS_TABLE)  # as the fold's asset does: the statistics, the GIN index


def snapshot(mem, project: str) -> tuple[list[str], np.ndarray]:
    """The same vectors and filter (active, valid now, current revision) as numpy arrays."""
    with mem.connection() as conn:
        rows = conn.execute(query("bench/recallable_vectors"), {"project": project, "model": MODEL}).fetchall()
    return [r[0] for r in rows], np.stack([r[1].to_numpy() for r in rows]).astype(np.float32)


@contextmanager
def knobs(**values):
    """Vocabulary knobs set for a measurement and restored after it (recall reads them at call time)."""
    saved = {name: getattr(V, name) for name in values}
    for name, value in values.items():
        setattr(V, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(V, name, value)


def timed_recalls(mem, project: str, queries: np.ndarray, k: int) -> tuple[list[float], list[set]]:
    """The whole recall() call (dense leg, RLS and filters included) for each query, after an untimed pass over the
    same queries: numpy's vectors are in memory, so ours are read warm too (the first path timed at 100k units took
    21.4 ms p95 with one warm-up call, the same path later in the sweep 15.5 ms)."""
    feed = iter(np.vstack([queries, queries]))
    mem.encoder = lambda model, text: next(feed)  # the same query vectors for every path and for numpy
    for _ in queries:  # pays for the connection, the plan cache and the pages the walk reads
        mem.recall(project, "warm up", k=k, legs="dense")
    latencies, found = [], []
    for _ in queries:
        start = time.perf_counter()
        result = mem.recall(project, "benchmark query", k=k, legs="dense")
        latencies.append((time.perf_counter() - start) * 1000)
        found.append({h.unit_id for h in result})
    return latencies, found


def timed_searches(mem, project: str, units: int, queries: np.ndarray, k: int) -> list[float]:
    """The dense leg's SQL alone (inside one scoped transaction): the part numpy's brute force stands for."""
    latencies = []
    model_key = mem.serving_model()
    with mem.connection() as conn, authz.scoped(conn, authz.Actor.reader(project, "bench")):
        database.keep_project_plans(conn, project, units)  # as recall keeps a project with units after its first one
        dense, _ = legs.send_planned(conn, embeddings.model_query("recall/dense", model_key), project, k)
        params = request.request_params(project, [], k, datetime.now(UTC), False)
        for q in np.vstack([queries, queries]):  # the first pass untimed, as in timed_recalls
            start = time.perf_counter()
            conn.execute(dense, legs.statement_params(params, q, sparse=False)).fetchall()
            latencies.append((time.perf_counter() - start) * 1000)
    return latencies[len(queries):]


def timed_full_text(mem, project: str, units: int, k: int, count: int) -> list[float]:
    """recall()'s full-text leg alone for a term one unit holds (the number its text names), after an untimed pass over
    the terms: from TEXT_INDEX_MIN_PROJECT_UNITS units the leg reads its matches through the GIN index (sql/027), not
    every unit of the project."""
    drawn = np.random.default_rng(units).integers(8, max(9, units), count)  # its own draw: the queries stay as before
    terms = [str(term) for term in drawn]  # 1-7 are in many units' text (their GiB)
    for term in terms:
        mem.recall(project, term, k=k, legs="sparse")
    latencies = []
    for term in terms:
        start = time.perf_counter()
        mem.recall(project, term, k=k, legs="sparse")
        latencies.append((time.perf_counter() - start) * 1000)
    return latencies


def timed_floors(mem, project: str, k: int, count: int) -> tuple[list[float], int]:
    """A request that searches nothing (scoped transaction, role, scopes, request context): every recall's floor."""
    latencies = []
    with mem.connection() as conn:
        for _ in range(count + 1):
            start = time.perf_counter()
            with authz.scoped(conn, authz.Actor.reader(project, "bench")):
                ef_search = request.request_context(conn, project, k, planned=False).ef_search
            latencies.append((time.perf_counter() - start) * 1000)
    return latencies[1:], ef_search


def overlap(found: list[set], truth: list[set], k: int) -> float:
    return round(float(np.mean([len(f & t) / k for f, t in zip(found, truth, strict=True)])), 4)


def latency_row(latencies: list[float], found: list[set], brute: list[float], truth: list[set], k: int) -> dict:
    """p50 / p95 of a run, each as a ratio to numpy's, and how much of the exact top k it found."""
    return {"p50_ms": round(median(latencies), 3), "p95_ms": round(percentile(latencies, 0.95), 3),
            "ratio_p50": round(median(latencies) / median(brute), 2),
            "ratio_p95": round(percentile(latencies, 0.95) / percentile(brute, 0.95), 2),
            "recall_at_k_vs_exact": overlap(found, truth, k)}


def measure(mem, project: str, ids: list[str], matrix: np.ndarray, queries: np.ndarray, k: int,
            exact_max: int) -> dict:
    """numpy brute force, our exact (up to exact_max units) and HNSW paths, an ef_search sweep and the request floor,
    on the same vectors; and the full-text leg alone for a rare term."""
    brute, truth = [], []
    for q in queries:
        start = time.perf_counter()
        scores = matrix @ q
        top = np.argpartition(-scores, k)[:k]
        top = top[np.argsort(-scores[top])]
        brute.append((time.perf_counter() - start) * 1000)
        truth.append({ids[i] for i in top})
    paths = {}
    for name, hnsw_from in (("exact", 10**12), ("hnsw", 0)):
        if name == "exact" and len(ids) > exact_max:  # one exact request reads every vector (100k: ~0.3 s)
            paths[name] = {"skipped": f"not timed above {exact_max:,} units (--exact-max)"}
            continue
        with knobs(HNSW_MIN_PROJECT_UNITS=hnsw_from):
            paths[name] = latency_row(*timed_recalls(mem, project, queries, k), brute, truth, k)
            searches = timed_searches(mem, project, len(ids), queries, k)
        paths[name].update(search_p50_ms=round(median(searches), 3),
                           search_ratio_p50=round(median(searches) / median(brute), 2))
    sweep = {}
    for ef in EF_SWEEP:
        with knobs(HNSW_MIN_PROJECT_UNITS=0, HNSW_EF_SEARCH=ef, HNSW_EF_SEARCH_MAX=ef):
            sweep[str(ef)] = latency_row(*timed_recalls(mem, project, queries, k), brute, truth, k)
    floors, ef_search = timed_floors(mem, project, k, len(queries))
    full_text = timed_full_text(mem, project, len(ids), k, len(queries))
    default = "hnsw" if len(ids) >= V.HNSW_MIN_PROJECT_UNITS else "exact"
    return {"units": len(ids), "numpy_ms": {"p50": round(median(brute), 3), "p95": round(percentile(brute, 0.95), 3)},
            "paths": paths, "default_path": default, "ef_search": ef_search, "ef_search_sweep": sweep,
            "floor_ms": {"p50": round(median(floors), 3), "ratio_p50": round(median(floors) / median(brute), 2)},
            "full_text_ms": {"p50": round(median(full_text), 3), "p95": round(percentile(full_text, 0.95), 3)},
            "ours_ms": {"p50": paths[default]["p50_ms"], "p95": paths[default]["p95_ms"]},
            "ratio_p50": paths[default]["ratio_p50"], "ratio_p95": paths[default]["ratio_p95"],
            "recall_at_k_vs_exact": paths[default]["recall_at_k_vs_exact"]}


def measure_project(mem, project: str, rng: np.random.Generator, args) -> dict:
    """Draw in-distribution queries (stored vectors plus noise) for a seeded project and measure it."""
    ids, stored = snapshot(mem, project)
    queries = queries_near(stored, rng, args.queries)
    result = measure(mem, project, ids, stored, queries, args.k, args.exact_max)
    print(project, result, flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--exact-max", type=int, default=200_000,
                        help="largest project whose exact path is timed too (1M units: seconds a request)")
    parser.add_argument("--beside", type=int, default=1000,
                        help="units of a small project seeded next to the largest one (0: none)")
    parser.add_argument("--among", type=int, default=300,
                        help="projects of 20 units seeded next to the smallest size, measured again among them (0: "
                             "none): the planner's guess of a project's size falls with the store's project count")
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    results = {}
    sizes = [int(s) for s in args.sizes.split(",")]
    for size in sizes:
        with scratch_memory() as mem:
            seed(mem, [f"bench-{size}"], size, rng)
            results[str(size)] = measure_project(mem, f"bench-{size}", rng, args)
            if args.among and size == min(sizes):
                seed(mem, [f"bench-small-{i}" for i in range(args.among)], 20, rng)
                results[f"{size}_among_{args.among}"] = measure_project(mem, f"bench-{size}", rng, args)
            if args.beside and size == max(sizes):  # one store, many projects: a small one must read its own rows
                seed(mem, [f"bench-{args.beside}-beside"], args.beside, rng)
                results[f"{args.beside}_beside_{size}"] = measure_project(mem, f"bench-{args.beside}-beside", rng,
                                                                          args)
    write_result("recall", {"k": args.k, "queries": args.queries, "model": MODEL, "sizes": results,
                            "goal": "ours <= 2x numpy brute force",
                            "note": "ours = the whole recall() call, dense leg, RLS and filters included, on the path "
                                    "the project size picks (both paths measured under 'paths'); floor = a scoped "
                                    "request that reads its context and searches nothing; full_text = recall() "
                                    "with the full-text leg alone for a term one unit's text holds; numpy = "
                                    "matrix @ query + argpartition over the same filtered vectors; synthetic "
                                    "clustered unit vectors, real units through the write path"})


if __name__ == "__main__":
    main()
