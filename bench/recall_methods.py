"""LoCoMo dialog recall with the query-side stages on and off and with the context-aware model (issue 16, items 2
and 3): one ingest, the same questions for every configuration, R@k overall and per category, the paired change
against the baseline, and recall latency with the query vector cached.

    .venv/bin/python -m bench.recall_methods --data /work/shared/benchmarks/locomo/locomo_dev.json

The context-aware model is added as an operator adds one: a single-run backfill of its unit_embeddings partitions
over every day, its coverage read, then the serving switch (and back to t1 afterwards).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, scratch_memory
from memory_assets import vocabulary as V
from memory_assets.defs import runner
from memory_assets.evaluation import locomo

C1 = "minilm-l6@gt0.1-c1"
KS = [1, 5, 10, 25]
CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {  # name -> (serving model, recall keywords)
    "baseline": (V.DEFAULT_SERVING_MODEL, {}),
    "prf": (V.DEFAULT_SERVING_MODEL, {"prf": True}),
    "second_round": (V.DEFAULT_SERVING_MODEL, {"second_round": True}),
    "prf+second_round": (V.DEFAULT_SERVING_MODEL, {"prf": True, "second_round": True}),
    "c1": (C1, {}),
}


def ask(mem: Any, qs: list[locomo.Question], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Each question asked twice (the second time its vector is cached): the evidence found in the top k, and the
    cached call's latency (what the store, fusion and any extra round cost)."""
    found: list[dict[int, float]] = []
    cached: list[float] = []
    for q in qs:
        mem.recall(q.project, q.text, k=max(KS), as_of=q.as_of, **kwargs)
        start = time.perf_counter()
        result = mem.recall(q.project, q.text, k=max(KS), as_of=q.as_of, **kwargs)
        cached.append((time.perf_counter() - start) * 1000)
        seen: set[str] = set()
        by_k: dict[int, float] = {}
        for rank, hit in enumerate(result.hits, start=1):
            seen |= {c["source_ref"] for c in hit.citations if c["source_ref"]}
            if rank in KS:
                by_k[rank] = len(seen & q.evidence) / len(q.evidence)
        found.append({k: by_k.get(k, len(seen & q.evidence) / len(q.evidence)) for k in KS})
    return {"found": found, "latency_cached_ms": {"p50": round(locomo.percentile(cached, 0.5), 2),
                                                  "p95": round(locomo.percentile(cached, 0.95), 2)}}


def summary(qs: list[locomo.Question], asked: dict[str, Any], base: dict[str, Any] | None) -> dict[str, Any]:
    """R@k overall and per category, and (against the baseline) the paired change in R@10 per category."""
    found = asked["found"]
    out: dict[str, Any] = {
        "recall_at": {str(k): round(statistics.fmean(f[k] for f in found), 4) for k in KS},
        "per_category": {name: {str(k): round(statistics.fmean(f[k] for q, f in zip(qs, found, strict=True)
                                                                if q.category == c), 4) for k in KS}
                         for c, name in locomo.CATEGORY_NAMES.items() if any(q.category == c for q in qs)},
        "latency_cached_ms": asked["latency_cached_ms"]}
    if base is not None:
        pairs = list(zip(qs, found, base["found"], strict=True))
        out["delta_r10"] = {"all": round(statistics.fmean(f[10] - b[10] for _, f, b in pairs), 4),
                            **{name: round(statistics.fmean(f[10] - b[10] for q, f, b in pairs if q.category == c), 4)
                               for c, name in locomo.CATEGORY_NAMES.items() if any(q.category == c for q in qs)},
                            "better": sum(f[10] > b[10] for _, f, b in pairs),
                            "worse": sum(f[10] < b[10] for _, f, b in pairs)}
    return out


def interleaved_latency(mem: Any, qs: list[locomo.Question], names: list[str], rounds: int = 3) -> dict[str, Any]:
    """Cached-vector latency of the t1 configurations asked in turn for each question (so a busy machine slows
    them alike): p50/p95 per configuration and the p50 ratio to the first."""
    times: dict[str, list[float]] = {name: [] for name in names}
    for q in qs:
        for name in names:
            mem.recall(q.project, q.text, k=max(KS), as_of=q.as_of, **CONFIGS[name][1])  # the vector is cached
        for _ in range(rounds):
            for name in names:
                start = time.perf_counter()
                mem.recall(q.project, q.text, k=max(KS), as_of=q.as_of, **CONFIGS[name][1])
                times[name].append((time.perf_counter() - start) * 1000)
    p50 = {name: locomo.percentile(values, 0.5) for name, values in times.items()}
    return {name: {"p50": round(p50[name], 2), "p95": round(locomo.percentile(values, 0.95), 2),
                   "p50_ratio": round(p50[name] / p50[names[0]], 3)} for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--configs", default=",".join(CONFIGS), help="the first is the one deltas are against")
    parser.add_argument("--samples", type=int, default=0, help="only the first N conversations (0: all)")
    parser.add_argument("--out", type=Path, default=RESULTS / "locomo_query_side.json")
    parser.add_argument("--latency", type=int, default=0,
                        help="only time the t1 configurations interleaved over the first N questions")
    args = parser.parse_args()
    samples = json.loads(args.data.read_text())[: args.samples or None]
    names = [n for n in args.configs.split(",") if n]
    report: dict[str, Any] = {"data": args.data.name, "units": "dialog", "samples": len(samples), "configs": {}}
    with scratch_memory(graph=True) as mem:
        report["ingest"] = {k: v for k, v in locomo.ingest(mem, samples, "dialog").items() if k != "runs"}
        qs = [q for sample in samples for q in locomo.questions(sample, "dialog")[0]]
        report["questions"] = len(qs)
        if args.latency:
            timed = [n for n in names if CONFIGS[n][0] == V.DEFAULT_SERVING_MODEL]
            report["latency_interleaved"] = {"questions": len(qs[: args.latency]),
                                             **interleaved_latency(mem, qs[: args.latency], timed)}
            names = []
        base = None
        for name in names:
            model, kwargs = CONFIGS[name]
            if model != mem.serving_model():
                if mem.embedding_coverage(model)["missing"]:
                    days = mem.days_with_units()
                    start = time.perf_counter()
                    run = runner.backfill_embeddings(model, days[0], days[-1], runner.dagster_instance(mem.url))
                    report[f"backfill_{model}"] = {"days": len(days), "seconds": round(time.perf_counter() - start, 1),
                                                   "success": run.success,
                                                   "coverage": mem.embedding_coverage(model)}
                mem.set_serving_model(model)
            asked = ask(mem, qs, kwargs)
            report["configs"][name] = {"model": model, "settings": kwargs, **summary(qs, asked, base)}
            base = base or asked
            print(name, json.dumps(report["configs"][name]), flush=True)
            mem.set_serving_model(V.DEFAULT_SERVING_MODEL)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
