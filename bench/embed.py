"""Embedding stage throughput next to raw model.encode() on the same texts and batch size, and peak memory."""

from __future__ import annotations

import argparse
import resource
import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import median, scratch_memory, timed, write_result
from bench.ingest import candidates
from memory_assets import embeddings
from memory_assets import vocabulary as V
from memory_assets.ledger import capture


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--units", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=1, help="untimed repeats before the timed ones")
    parser.add_argument("--model", default=V.DEFAULT_SERVING_MODEL)
    args = parser.parse_args()
    embedder = embeddings.embedder_for(args.model)
    embedder.encode(["warm up"])
    rss_after_load = peak_rss_mib()
    today = datetime.now(UTC).date()
    torch = embeddings.Embedder(embedder.spec, backend="torch")  # beside: what the stage used before the ONNX export
    stage, first, raw, raw_torch = [], [], [], []
    with scratch_memory() as mem, mem.connection() as conn:
        capture.remember_many(conn, candidates(args.units, "embed-bench"))
        units = embeddings.stale_units(conn, args.model, limit=args.units)
        texts = embeddings.texts_of(embedder.spec, units)

        def stage_run(without_index: bool = False) -> float:
            conn.execute("DELETE FROM memory_embeddings")
            if without_index:  # a model's first run: its vectors written, then its graph built over them
                for index in embeddings.model_indexes(conn, embeddings.model_index_prefix(embedder.spec), valid=None):
                    conn.execute(f"DROP INDEX {index}")
            seconds, counts = timed(embeddings.embed_day, conn, embedder, today)
            assert counts["written"] == args.units, counts
            return args.units / seconds

        def raw_run() -> float:
            return args.units / timed(embedder.encode, texts)[0]

        # untimed: the first stage run paid one-time costs (the model's index created, statements prepared, the
        # encoder's buffers sized to full batches) and was the slowest of its three in each of three runs
        for _ in range(args.warmup):
            stage_run()
            raw_run()
        for repeat in range(args.repeats):  # the order alternates, so neither side always runs on a fresher machine
            if repeat % 2:
                raw.append(raw_run())
                stage.append(stage_run())
            else:
                stage.append(stage_run())
                raw.append(raw_run())
            raw_torch.append(args.units / timed(torch.encode, texts)[0])
            first.append(stage_run(without_index=True))
    write_result("embed", {
        "model": args.model,
        "document_encoder": embedder.backend,
        "batch_size": embedder.batch_size,
        "units": args.units,
        "repeats": args.repeats,
        "warmup_repeats": args.warmup,
        "units_per_second_median": {"embedding_stage": round(median(stage), 1), "raw_encode": round(median(raw), 1),
                                    "raw_torch_encode": round(median(raw_torch), 1),
                                    "embedding_stage_first_run": round(median(first), 1)},
        "runs": {"embedding_stage": [round(x, 1) for x in stage], "raw_encode": [round(x, 1) for x in raw],
                 "raw_torch_encode": [round(x, 1) for x in raw_torch],
                 "embedding_stage_first_run": [round(x, 1) for x in first]},
        "ratio_stage_vs_raw_encode": round(median(stage) / median(raw), 3),
        "ratio_first_run_vs_raw_encode": round(median(first) / median(raw), 3),
        "ratio_raw_encode_vs_torch": round(median(raw) / median(raw_torch), 3),
        "goal_ratio": 0.9,
        "peak_rss_mib": {"after_model_load": round(rss_after_load, 1), "end": round(peak_rss_mib(), 1)},
        "note": "stage = read stale units, build texts, encode, write version-guarded vectors (HNSW index maintained); "
                "first run = the same for a model with no index yet (vectors written, then the graph built over "
                "them, the build timed in); raw_encode = the same encoder's encode() (DOCUMENT_ENCODER); "
                "raw_torch_encode = sentence-transformers",
    })


if __name__ == "__main__":
    main()
