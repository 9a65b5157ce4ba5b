"""One HNSW graph build over the scale curve's synthetic vectors, and its walk's top 10 against numpy's exact top 10 at
each ef_search: what a larger m or ef_construction buys before the store's own index is built with it.

    .venv/bin/python -m bench.hnsw_graph --size 1000000 --m 32 --ef-construction 200

The raw walk (`ORDER BY embedding <=> q LIMIT 10` over a half-precision graph on one bare table, as the store's
index is built, docs/scaling.md item 15), not recall(): a whole call adds the request's reads and the re-rank.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from pgvector import HalfVector

from bench.common import median, percentile, scratch_memory, write_result
from bench.recall import DIM, clustered_vectors, queries_near

TABLE = "bench_hnsw_graph"


def build(conn, vectors: np.ndarray, m: int, ef_construction: int) -> dict[str, float]:
    """Copy the vectors into a bare table and build the graph over them: the seconds each took and the graph's size."""
    conn.execute(f"CREATE TABLE {TABLE} (id integer, embedding halfvec({DIM}))")
    start = time.perf_counter()
    with conn.cursor() as cur, cur.copy(f"COPY {TABLE} (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "halfvec"])
        for i, vector in enumerate(vectors):
            copy.write_row((i, HalfVector(vector)))
    copied = time.perf_counter() - start
    # the whole graph in memory while it is built (bench/recall.py's budget: ~2.5 kB a vector), one process a core
    conn.execute(f"SET maintenance_work_mem = '{max(1024, len(vectors) * 2560 // 2**20)}MB'")
    conn.execute(f"SET max_parallel_maintenance_workers = {max(0, (os.cpu_count() or 1) - 1)}")
    start = time.perf_counter()
    graph = f"WITH (m = {m}, ef_construction = {ef_construction})"
    conn.execute(f"CREATE INDEX {TABLE}_graph ON {TABLE} USING hnsw (embedding halfvec_cosine_ops) {graph}")
    built = time.perf_counter() - start
    size = conn.execute(f"SELECT pg_relation_size('{TABLE}_graph')").fetchone()[0]
    return {"copy_s": round(copied, 1), "build_s": round(built, 1), "graph_mb": round(size / 2**20)}


def walk(conn, queries: np.ndarray, truth: list[set[int]], ef_search: int) -> dict[str, float]:
    """The walk's share of the exact top 10 and its latency at one ef_search, after an untimed pass over 20 queries."""
    conn.execute(f"SET hnsw.ef_search = {ef_search}")
    statement = f"SELECT id FROM {TABLE} ORDER BY embedding <=> %s LIMIT 10"
    for query in queries[:20]:
        conn.execute(statement, (HalfVector(query),)).fetchall()
    latencies, overlaps = [], []
    for query, exact in zip(queries, truth, strict=True):
        start = time.perf_counter()
        found = {row[0] for row in conn.execute(statement, (HalfVector(query),))}
        latencies.append((time.perf_counter() - start) * 1000)
        overlaps.append(len(found & exact) / 10)
    return {"top10_vs_exact": round(float(np.mean(overlaps)), 3), "p50_ms": round(median(latencies), 2),
            "p95_ms": round(percentile(latencies, 0.95), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--ef-construction", type=int, default=128)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ef-search", default="100,200,400,600,800,1000")
    args = parser.parse_args()
    rng = np.random.default_rng(7)  # bench/recall.py's seed: the same vectors, the same queries
    vectors = clustered_vectors(args.size, rng)
    queries = queries_near(vectors, rng, args.queries)
    truth = [set(np.argpartition(-(vectors @ query), 10)[:10].tolist()) for query in queries]
    with scratch_memory() as mem, mem.connection() as conn:
        conn.autocommit = True
        built = build(conn, vectors, args.m, args.ef_construction)
        print(built, flush=True)
        sweep = {}
        for ef_search in (int(value) for value in args.ef_search.split(",")):
            sweep[str(ef_search)] = walk(conn, queries, truth, ef_search)
            print(ef_search, sweep[str(ef_search)], flush=True)
    write_result("hnsw_graph", {"size": args.size, "m": args.m, "ef_construction": args.ef_construction,
                                "queries": args.queries, **built, "ef_search": sweep,
                                "note": "the raw walk over a halfvec graph on a bare table, not recall(); the scale "
                                        "curve's synthetic vectors (64 clusters, near-random within each), queries "
                                        "a stored vector plus noise, the exact top 10 from numpy in float32"})


if __name__ == "__main__":
    main()
