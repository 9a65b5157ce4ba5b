"""Curation's nearest older unit in a large project: the HNSW index walk (what curate_day takes from
HNSW_MIN_PROJECT_UNITS units on) against the exact scan, on the same newcomers: how often they find the same
neighbour and reach the same verdict (merge, review or nothing), and each one's time per newcomer."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from psycopg.rows import dict_row

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import percentile, scratch_memory, write_result
from bench.ingest import candidates
from memory_assets import curation, embeddings
from memory_assets import vocabulary as V
from memory_assets.database import query
from memory_assets.ledger import capture


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--units", type=int, default=6000, help="units of one project, all of today")
    parser.add_argument("--sample", type=int, default=300, help="newcomers compared, spread over the project")
    args = parser.parse_args()
    embedder = embeddings.embedder_for(V.DEFAULT_SERVING_MODEL)
    today = datetime.now(UTC).date()
    times: dict[str, list[float]] = {"exact": [], "hnsw": []}
    same_neighbour = same_verdict = 0
    verdicts: dict[str, int] = {}
    with scratch_memory() as mem, mem.connection() as conn:
        for start in range(0, args.units, V.IMPORT_BATCH):
            capture.remember_many(conn, candidates(min(V.IMPORT_BATCH, args.units - start), "curation-bench", start))
        embeddings.embed_day(conn, embedder, today)
        with conn.cursor(row_factory=dict_row) as cur:
            units = cur.execute(query("curation/day_units"),
                                curation.day_units_params(embedder.spec.key, today)).fetchall()
            sample = units[1:: max(1, len(units) // args.sample)][: args.sample]
            for i, unit in enumerate(sample):
                found = {}
                for path in (("exact", "hnsw") if i % 2 else ("hnsw", "exact")):  # alternate who goes first
                    with conn.transaction():
                        begin = time.perf_counter()
                        found[path] = curation.nearest_older(cur, {**unit, "large": path == "hnsw"},
                                                             embedder.spec.key)
                        times[path].append((time.perf_counter() - begin) * 1000)
                exact, hnsw = (curation.verdict(unit, found[path]) for path in ("exact", "hnsw"))
                same_neighbour += (found["exact"] or {}).get("id") == (found["hnsw"] or {}).get("id")
                same_verdict += exact == hnsw
                verdicts[str(exact)] = verdicts.get(str(exact), 0) + 1
    ms = {path: {"p50": round(percentile(values, 0.5), 2), "p95": round(percentile(values, 0.95), 2)}
          for path, values in times.items()}
    write_result("curation", {
        "units": args.units, "newcomers": len(sample), "ms_per_newcomer": ms,
        "speedup_p50": round(ms["exact"]["p50"] / ms["hnsw"]["p50"], 2),
        "same_neighbour": round(same_neighbour / len(sample), 4), "same_verdict": round(same_verdict / len(sample), 4),
        "exact_verdicts": verdicts,
        "note": "one project of templated units (bench.ingest), all created today and embedded; each sampled newcomer "
                "asked both ways back to back, in alternating order, inside its own transaction like curate_day",
    })


if __name__ == "__main__":
    main()
