"""Where a recall's time goes on the LoCoMo questions: the whole call cold (the question encoded) and cached (its
vector from the query cache), each stage's time, the round trips to the server, Python fusion over the real
candidate lists, and the query encoder's (ONNX) top-10 agreement with torch's vectors.

Runs on a store that `memory-assets eval locomo` filled (MEMORY_ASSETS_HOME), so before and after a change are
measured on the same units: `MEMORY_ASSETS_HOME=... python bench/recall_stages.py --label after`.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import LOCOMO_DEV, percentile, write_result
from memory_assets import api, embeddings, recall
from memory_assets import vocabulary as V
from memory_assets.database import query
from memory_assets.evaluation import locomo
from memory_assets.recall import fusion, search

STAGES = ("request_context", "dense_leg", "sparse_leg", "neighbours", "details", "candidates",
          "candidates_while_encoding", "cited_text")  # candidates_while_encoding holds the encode it overlaps
FUSION = ("fuse", "seeds", "of_seeds", "spread_to_neighbours", "lift_sessions", "score", "ranked")


def summary(values: list[float]) -> dict:
    return {"p50": round(statistics.median(values), 3), "p95": round(percentile(values, 0.95), 3),
            "mean": round(statistics.fmean(values), 3)} if values else {}


class Stopwatch:
    """Wraps the orchestrator's stage functions and the fusion steps, summing milliseconds per stage per call."""

    def __init__(self) -> None:
        self.current: dict[str, float] = defaultdict(float)

    def wrap(self, owner: object, name: str, stage: str) -> None:
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.current[stage] += (time.perf_counter() - start) * 1000

        setattr(owner, name, timed)

    def take(self) -> dict[str, float]:
        taken, self.current = dict(self.current), defaultdict(float)
        return taken


def round_trips(conn, call) -> tuple[int, int]:
    """(round trips, statements) of one call, read from libpq's protocol trace: a Sync, a Flush (pipeline mode) or a
    simple Query is a wait for the server; each Bind or Query a statement."""
    with tempfile.TemporaryFile("w+") as trace:
        conn.pgconn.trace(trace.fileno())
        try:
            call()
        finally:
            conn.pgconn.untrace()
        trace.seek(0)
        sent = [fields[3].split()[0] for fields in (line.split("\t") for line in trace) if fields[1:2] == ["F"]]
    waits = [m for m, after in itertools.zip_longest(sent, sent[1:]) if m in ("Sync", "Flush", "Query")
             and after not in ("Sync", "Flush")]  # consecutive syncs and flushes are one wait
    return len(waits), sum(m in ("Bind", "Query") for m in sent)


def agreement(mem, qs, model: str) -> dict:
    """Top 10 of each question by the query encoder's vector vs by torch's, over its conversation's stored vectors."""
    onnx = embeddings.query_encoder(model)
    torch = embeddings.query_encoder(model, "torch")
    if type(onnx) is type(torch):
        return {"skipped": "onnxruntime is not installed"}
    stored = {}
    with mem.connection() as conn:
        for project in {q.project for q in qs}:
            rows = conn.execute(query("bench/recallable_vectors"), {"project": project, "model": model}).fetchall()
            stored[project] = np.stack([r[1].to_numpy() for r in rows]).astype(np.float32)
    overlap, cosine = [], []
    for q in qs:
        a, b = torch.encode([q.text])[0], onnx.encode([q.text])[0]
        matrix = stored[q.project]
        top_a, top_b = set(np.argsort(-(matrix @ a))[:10]), set(np.argsort(-(matrix @ b))[:10])
        overlap.append(len(top_a & top_b) / 10)
        cosine.append(float(a @ b))
    return {"recall_at_10_vs_torch": round(statistics.fmean(overlap), 4), "cosine_min": round(min(cosine), 4),
            "cosine_mean": round(statistics.fmean(cosine), 4), "questions": len(qs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", default=str(LOCOMO_DEV))
    parser.add_argument("--questions", type=int, default=300, help="questions asked (spread over every sample)")
    parser.add_argument("--label", default="current")
    parser.add_argument("--k", type=int, default=25)
    args = parser.parse_args()
    samples = json.loads(Path(args.data).read_text())
    qs = [q for sample in samples for q in locomo.questions(sample, "dialog")[0]]
    qs = qs[:: max(1, len(qs) // args.questions)][: args.questions]
    watch = Stopwatch()
    for name in STAGES:
        if hasattr(search, name):
            watch.wrap(search, name, name)
    for name in FUSION:
        if hasattr(fusion, name):
            watch.wrap(fusion, name, "fusion")
    watch.wrap(embeddings, "serving_model", "serving_model")
    watch.wrap(api, "opening", "serving_model")  # the kill switch with the serving model, one round trip
    mem = api.connect()
    encode = mem.encoder

    class TimedEncoder:  # the API's encoder, timed; at_hand and warm pass through, so recall() overlaps as it would
        def __call__(self, model_key, text):
            start = time.perf_counter()
            try:
                return encode(model_key, text)
            finally:
                watch.current["encode"] += (time.perf_counter() - start) * 1000

        at_hand, warm = encode.at_hand, encode.warm

    encoder = TimedEncoder()
    mem.encoder = encoder
    mem.recall(qs[0].project, "warm up the model and the connections", k=args.k, as_of=qs[0].as_of)
    cold, cached, stages_cold, stages_cached = [], [], defaultdict(list), defaultdict(list)
    for q in qs:
        api.encode_query.clear()
        for times, stages in ((cold, stages_cold), (cached, stages_cached)):
            watch.take()
            start = time.perf_counter()
            mem.recall(q.project, q.text, k=args.k, as_of=q.as_of)
            times.append((time.perf_counter() - start) * 1000)
            for stage, ms in watch.take().items():
                stages[stage].append(ms)
    with mem.connection() as conn:
        q = qs[0]
        trips, statements = round_trips(conn, lambda: recall.recall(conn, q.project, q.text, k=args.k, as_of=q.as_of,
                                                                    encoder=encoder))
    fusion_alone = []
    if hasattr(search, "candidates"):  # Python fusion and scoring over the real candidate lists, nothing else
        found = []
        original, overlapped = search.candidates.__wrapped__, search.candidates_while_encoding.__wrapped__
        search.candidates = lambda *a, **kw: found.append(original(*a, **kw)) or found[-1]

        def overlapped_kept(*args, **kwargs):  # a question the query cache no longer holds takes the overlapped path
            result = overlapped(*args, **kwargs)
            found.append(result[0])
            return result

        search.candidates_while_encoding = overlapped_kept
        for q in qs:
            mem.recall(q.project, q.text, k=args.k, as_of=q.as_of)
        for q, cands in zip(qs, found, strict=True):
            best = float("inf")
            for _ in range(5):
                start = time.perf_counter()
                fused = fusion.fuse(cands.dense, cands.sparse, (V.DENSE_WEIGHT, V.SPARSE_WEIGHT))
                seeds = fusion.seeds(fused, {row[0] for row in cands.dense + cands.sparse if row[2]})
                fusion.spread_to_neighbours(fused, fusion.of_seeds(cands.near, seeds, cands.details))
                fusion.lift_sessions(fused, cands.details)
                fusion.score(fused, cands.details, q.text, q.as_of)
                fusion.ranked(fused, cands.details, args.k)
                best = min(best, (time.perf_counter() - start) * 1000)
            fusion_alone.append(best)
    result = {
        "label": args.label, "questions": len(qs), "k": args.k, "load_average": [round(x, 2) for x in os.getloadavg()],
        "query_encoder": V.QUERY_ENCODER if hasattr(V, "QUERY_ENCODER") else "torch",
        "cold_ms": summary(cold), "cached_ms": summary(cached),
        "stages_cold_mean_ms": {s: round(statistics.fmean(v + [0.0] * (len(qs) - len(v))), 3)
                                for s, v in sorted(stages_cold.items())},
        "stages_cached_mean_ms": {s: round(statistics.fmean(v + [0.0] * (len(qs) - len(v))), 3)
                                  for s, v in sorted(stages_cached.items())},
        "round_trips": trips, "statements": statements,
        "fusion_alone_ms": summary(fusion_alone),
        "note": "one process, questions spread over the seven LoCoMo dev conversations, each asked cold (query "
                "cache cleared) then cached; stage times are wrapped functions (the API's kill-switch read is in "
                "the call, not in a stage); round trips counted from libpq's trace for one recall() without the "
                "API's kill-switch read; fusion_alone = fuse..ranked over the candidate lists the statement "
                "returned, best of 5",
    }
    if hasattr(embeddings, "query_encoder"):
        result["onnx_agreement"] = agreement(mem, qs, mem.serving_model())
    mem.close()
    write_result(f"recall_stages_{args.label}", result)


if __name__ == "__main__":
    main()
