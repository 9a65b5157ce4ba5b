"""One approximate index built over synthetic vectors (the scale curve's clusters, or text-like ones drawn around
LoCoMo's embedded turns), and its search's top 10 against numpy's exact top 10 at each setting: what a larger HNSW
graph (m, ef_construction) or an IVFFlat index (lists, probes) buys before the store's own index is built with it.

    .venv/bin/python -m bench.ann_index --size 1000000 --m 32 --ef-construction 200
    .venv/bin/python -m bench.ann_index --size 1000000 --lists 1000 --search 10,20,40 --vectors text

The raw search (`ORDER BY embedding <=> q LIMIT 10` over half-precision vectors on one bare table, as the store's
index is built, docs/scaling.md item 15), not recall(): a whole call adds the request's reads and the re-rank.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
from pgvector import HalfVector

from bench.common import LOCOMO_DEV, median, percentile, scratch_memory, write_result
from bench.recall import DIM, MODEL, clustered_vectors, queries_near, whole_index_in_memory
from memory_assets import embeddings
from memory_assets.evaluation import locomo

TABLE = "bench_ann_index"


def text_like(n: int, rng: np.random.Generator, queries: int) -> tuple[np.ndarray, np.ndarray]:
    """n vectors drawn around the LoCoMo development conversations' turns as the model embeds them (a turn's vector
    plus Gaussian noise shaped by the turns' own covariance, at half its scale), and the first LoCoMo questions as
    queries: text's neighbourhoods, a million vectors about four thousand turns (docs/scaling.md item 14)."""
    samples = json.loads(LOCOMO_DEV.read_text())
    turns = [turn["text"] for sample in samples for _, _, session in locomo.sessions(sample["conversation"])
             for turn in session]
    asked = [qa["question"] for sample in samples for qa in sample["qa"]][:queries]
    encoder = embeddings.query_encoder(MODEL)
    embedded = np.asarray(encoder.encode(turns), dtype=np.float32)
    shape = np.linalg.cholesky(np.cov(embedded, rowvar=False) + 1e-6 * np.eye(DIM)).astype(np.float32)
    vectors = embedded[rng.integers(0, len(turns), n)]
    for start in range(0, n, 100_000):  # the noise a slice at a time: a million 384-d draws at once is 3 GB more
        rows = vectors[start:start + 100_000]
        rows += 0.5 * rng.standard_normal(rows.shape).astype(np.float32) @ shape.T
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors, np.asarray(encoder.encode(asked), dtype=np.float32)


def build(conn, vectors: np.ndarray, method: str) -> dict[str, float]:
    """Copy the vectors into a bare table and build the index over them (method: pgvector's access method and its
    options): the seconds each took and the index's size."""
    conn.execute(f"CREATE TABLE {TABLE} (id integer, embedding halfvec({DIM}))")
    start = time.perf_counter()
    with conn.cursor() as cur, cur.copy(f"COPY {TABLE} (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "halfvec"])
        for i, vector in enumerate(vectors):
            copy.write_row((i, HalfVector(vector)))
    copied = time.perf_counter() - start
    conn.execute(whole_index_in_memory(len(vectors)))  # and one process a core
    conn.execute(f"SET max_parallel_maintenance_workers = {max(0, (os.cpu_count() or 1) - 1)}")
    start = time.perf_counter()
    conn.execute(f"CREATE INDEX {TABLE}_search ON {TABLE} USING {method}")
    built = time.perf_counter() - start
    size = conn.execute(f"SELECT pg_relation_size('{TABLE}_search')").fetchone()[0]
    return {"copy_s": round(copied, 1), "build_s": round(built, 1), "index_mb": round(size / 2**20)}


def search(conn, queries: np.ndarray, truth: list[set[int]], setting: str) -> dict[str, float]:
    """The search's share of the exact top 10 and its latency at one setting (hnsw.ef_search or ivfflat.probes),
    after an untimed pass over 20 queries."""
    conn.execute(f"SET {setting}")
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
    parser.add_argument("--m", type=int, default=16, help="HNSW: neighbours a node keeps")
    parser.add_argument("--ef-construction", type=int, default=128, help="HNSW: candidates a build weighs")
    parser.add_argument("--lists", type=int, default=0, help="IVFFlat in place of HNSW, with this many lists")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--vectors", choices=("clustered", "text"), default="clustered",
                        help="the scale curve's clusters, or vectors drawn around LoCoMo's embedded turns")
    parser.add_argument("--search", default="", help="ef_search (HNSW) or probes (IVFFlat) values, comma-separated")
    args = parser.parse_args()
    if args.lists:
        index = {"method": "ivfflat", "lists": args.lists}
        method = f"ivfflat (embedding halfvec_cosine_ops) WITH (lists = {args.lists})"
        setting, values = "ivfflat.probes", args.search or "1,5,10,20,40"
    else:
        index = {"method": "hnsw", "m": args.m, "ef_construction": args.ef_construction}
        method = f"hnsw (embedding halfvec_cosine_ops) WITH (m = {args.m}, ef_construction = {args.ef_construction})"
        setting, values = "hnsw.ef_search", args.search or "100,200,400,600,800,1000"
    rng = np.random.default_rng(7)  # bench/recall.py's seed and draws (its 1M store draws after its 10k and 100k)
    if args.vectors == "text":
        vectors, queries = text_like(args.size, rng, args.queries)
    else:
        vectors = clustered_vectors(args.size, rng)
        queries = queries_near(vectors, rng, args.queries)
    truth = [set(np.argpartition(-(vectors @ query), 10)[:10].tolist()) for query in queries]
    with scratch_memory() as mem, mem.connection() as conn:
        conn.autocommit = True
        built = build(conn, vectors, method)
        print(built, flush=True)
        sweep = {}
        for value in (int(value) for value in values.split(",")):
            sweep[str(value)] = search(conn, queries, truth, f"{setting} = {value}")
            print(setting, value, sweep[str(value)], flush=True)
    drawn = ("vectors drawn around LoCoMo's embedded turns, queries LoCoMo's first questions" if args.vectors == "text"
             else "the scale curve's synthetic vectors (64 clusters, near-random within each), queries a stored "
                  "vector plus noise")
    write_result("ann_index", {"size": args.size, "vectors": args.vectors, **index, "queries": len(queries), **built,
                               setting: sweep, "note": f"the raw search over halfvec vectors on a bare table, not "
                                                       f"recall(); {drawn}; the exact top 10 from numpy in float32"})


if __name__ == "__main__":
    main()
