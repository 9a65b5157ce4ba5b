"""Load: 16 concurrent writers, each with its own Memory (`memory_assets.connect`), send fresh facts, exact
duplicates (another writer's fact, raced), replays, near duplicates (case and spacing), secrets and bad input,
while 4 recallers run Memory.recall in a loop and the ledger and embedding assets materialise in this process
(the main thread: Dagster runs in-process there). Afterwards every acknowledged write is present exactly once,
no content has two live units, unit numbers are gap-free per project, no secret is stored, and the only exceptions
were the ValidationErrors the bad input asked for. Recall p50/p95 under load are measured beside recall alone
(same recallers, same ledger, before the load) and written by the soak run to bench/results/reliability.json.

`make test` runs 16 writers x 30 candidates; `make soak` (marker `soak`) 16 x 500. LOAD_SEED picks the mix
(random when unset; the seed is in every failure message). No timing is asserted."""

from __future__ import annotations

import itertools
import os
import random
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest

import memory_assets
from memory_assets import gates
from memory_assets import vocabulary as V
from memory_assets.defs import runner
from memory_assets.defs.embeddings.assets import unit_embeddings
from memory_assets.defs.ledger.assets import ledger_units
from memory_assets.defs.partitions import model_day_key
from memory_assets.errors import ValidationError
from tests.cases import SECRET_BASE, SECRET_CORPUS, SECRETS, SERVING_MODEL, embed_all, record_reliability

WRITERS, RECALLERS, PROJECTS = 16, 4, 4
MATERIALISE_PAUSE_S = 5.0  # between two materialisations during the load
BULK_WRITERS = {7, 15}  # these two send their facts through remember_many(fold_now=False): the assets fold them
WORDS = ("amber", "basalt", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper", "kestrel",
         "lagoon", "meadow", "nickel", "orchid", "pebble", "quartz", "raven", "saffron", "tundra", "umber", "violet",
         "willow", "yarrow", "zephyr")
SERVICES = ("billing", "search", "ingest", "export", "auth", "render", "backup", "mailer")
BAD_INPUT: list[dict[str, Any]] = [
    {"confidence": float("nan")}, {"importance": 10**400}, {"title": ""}, {"project": "bad name!"},
    {"kind": "opinion"}, {"supersedes": 123}, {"task_id": "two words"}, {"title": "zero\u200bwidth"},
    {"valid_from": datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14)))}, {"paths": "src/"},
    {"body": "nul \x00 byte"}, {"persona": "x" * 300},
]


def project_of(writer: int) -> str:
    return f"load-{writer % PROJECTS}"


def word(number: int, salt: int) -> str:
    return WORDS[(number * 7 + salt) % len(WORDS)]


def fact(writer: int, index: int) -> dict[str, Any]:
    """Writer w's fact number i: distinct words per (w, i), so no two facts share a content hash by accident."""
    a, b, c = word(index, writer), word(index // 25, writer + 3), word(writer, index + 11)
    service = SERVICES[(writer + index) % len(SERVICES)]
    return dict(project=project_of(writer), kind="env", type="semantic",
                title=f"The {service} {a} {b} host",
                body=f"The {service} service of writer {writer} item {index} runs on the {a} {b} {c} host because "
                     f"the {c} rack holds its {index % 9 + 2} workers.")


@dataclass
class Ack:
    """A write the API acknowledged: the content it stored (or found), under which task, as which token."""

    project: str
    content_hash: str
    task_id: str
    token: str | None  # None for a bulk write (remember_many answers counts, not tokens)


@dataclass
class Tally:
    """What one writer sent and got back."""

    sent: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    acks: list[Ack] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)


def plan(writer: int, size: int, rng: random.Random) -> list[tuple[str, dict[str, Any]]]:
    """A writer's candidates: fresh facts, another writer's fact raced (exact duplicate), a replay of its own, a
    case-and-spacing variant (near duplicate, same content hash), a secret, bad input."""
    candidates: list[tuple[str, dict[str, Any]]] = []
    fresh: list[dict[str, Any]] = []
    for index in range(size):
        shape = rng.choices(("fresh", "duplicate", "replay", "near", "secret", "bad"), (50, 12, 8, 10, 10, 10))[0]
        if shape in ("replay", "near") and not fresh:
            shape = "fresh"
        if shape == "fresh":
            fields = {**fact(writer, index), "task_id": f"T-{writer}-{index}"}
            fresh.append(fields)
        elif shape == "duplicate":  # the same fact another writer of the project sends (or will send) as fresh
            other = (writer + PROJECTS * rng.randint(1, WRITERS // PROJECTS - 1)) % WRITERS
            fields = {**fact(other, rng.randrange(size)), "task_id": f"T-{writer}-{index}"}
        elif shape == "replay":  # the same candidate again, same task: idempotent
            fields = dict(rng.choice(fresh))
        elif shape == "near":
            base = rng.choice(fresh)
            fields = {**base, "title": base["title"].upper(), "body": "  " + base["body"].replace(" ", "  "),
                      "task_id": f"T-{writer}-{index}"}
        elif shape == "secret":
            if rng.random() < 0.5:
                _, text, _ = rng.choice(SECRETS)
                fields = {**fact(writer, index), "body": f"Deploy with {text} on the staging host."}
            else:
                _, corpus, _ = rng.choice(SECRET_CORPUS)
                fields = {**SECRET_BASE, "project": project_of(writer), **corpus}
            fields["task_id"] = fields.get("task_id", f"T-{writer}-{index}")
        else:
            bad = [b for b in BAD_INPUT if writer not in BULK_WRITERS or "supersedes" not in b]  # not a field
            fields = {**fact(writer, index), "task_id": f"T-{writer}-{index}", **rng.choice(bad)}
        candidates.append((shape, fields))
    return candidates


def write(url: str, writer: int, candidates: list[tuple[str, dict[str, Any]]], tally: Tally,
          start: threading.Barrier) -> None:
    """One writer's thread: its own Memory, its candidates one by one (bulk writers: facts in batches of 5)."""
    batch: list[tuple[gates.Candidate, str]] = []

    def flush() -> None:
        if not batch:
            return
        started = time.perf_counter()
        counts = mem.remember_many([c for c, _ in batch], fold_now=False)
        tally.latencies.append(time.perf_counter() - started)
        rejected = sum(counts["rejected"].values())
        tally.outcomes[V.OUTCOME_REJECTED] += rejected
        tally.outcomes["captured"] += counts["captured"]
        if counts["rejected"] != ({V.REASON_SECRET: rejected} if rejected else {}) or \
                rejected != sum(shape == "secret" for _, shape in batch):
            tally.unexpected.append(f"writer {writer}: a batch was rejected {counts['rejected']}")
        tally.acks.extend(Ack(c.project, c.content_hash, c.task_id or "", None) for c, shape in batch
                          if shape != "secret")  # acknowledged: captured now (or already), folded by the assets
        batch.clear()

    try:
        mem = memory_assets.connect(url, pool_size=2)
    except Exception as error:
        tally.unexpected.append(f"writer {writer}: connect: {type(error).__name__}: {error}")
        start.abort()
        return
    try:
        start.wait()
        for shape, fields in candidates:
            tally.sent[shape] += 1
            try:
                if writer in BULK_WRITERS:
                    batch.append((gates.validate(**fields), shape))
                    if len(batch) == 5:
                        flush()
                    continue
                started = time.perf_counter()
                result = mem.remember(**fields)
                tally.latencies.append(time.perf_counter() - started)
            except ValidationError as error:
                tally.outcomes["ValidationError"] += 1
                if shape not in ("bad", "secret"):
                    tally.unexpected.append(f"writer {writer} {shape}: {error}")
                continue
            tally.outcomes[result.status] += 1
            if shape == "secret":
                if result.reason != V.REASON_SECRET:
                    tally.unexpected.append(f"writer {writer}: a secret was {result.status}")
            elif shape == "bad":
                tally.unexpected.append(f"writer {writer}: bad input was {result.status}")
            elif result.token is None or result.status == V.OUTCOME_REJECTED:
                tally.unexpected.append(f"writer {writer} {shape}: {result}")
            else:
                candidate = gates.validate(**fields)
                tally.acks.append(Ack(candidate.project, candidate.content_hash, fields["task_id"], result.token))
        flush()
    except Exception as error:  # anything else is a finding
        tally.unexpected.append(f"writer {writer}: {type(error).__name__}: {error}")
    finally:
        mem.close()


QUERIES = [f"{service} {a} host" for service in SERVICES for a in WORDS[:6]]


def recall_loop(url: str, rng: random.Random, until: threading.Event | int, latencies: list[float],
                unexpected: list[str]) -> None:
    """One recaller: its own Memory, recall over random projects and queries until told to stop (or n times)."""
    mem = memory_assets.connect(url, pool_size=2)
    done = 0
    try:
        while not until.is_set() if isinstance(until, threading.Event) else done < until:
            project = f"load-{rng.randrange(PROJECTS)}"
            started = time.perf_counter()
            hits = mem.recall(project, rng.choice(QUERIES), k=10)
            latencies.append(time.perf_counter() - started)
            done += 1
            if any(not h.title.startswith("The ") for h in hits) or len(hits) > 10:
                unexpected.append(f"recall in {project} answered {[h.title for h in hits]}")
    except Exception as error:
        unexpected.append(f"recaller: {type(error).__name__}: {error}")
    finally:
        mem.close()


def percentiles(latencies: list[float]) -> dict[str, float]:
    """p50 and p95 in milliseconds, and how many calls they cover."""
    ordered = sorted(latencies)
    if not ordered:
        return {"calls": 0}
    return {"calls": len(ordered), "p50_ms": round(1000 * statistics.median(ordered), 1),
            "p95_ms": round(1000 * ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1)}


def recall_alone(url: str, seed: int, calls: int) -> tuple[list[float], list[str]]:
    """The recallers with nothing else running: the baseline beside recall under load."""
    latencies: list[float] = []
    unexpected: list[str] = []
    threads = [threading.Thread(target=recall_loop, args=(url, random.Random(seed + r), calls, latencies, unexpected))
               for r in range(RECALLERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, unexpected


def materialise(url: str, since: date) -> list[float]:
    """The ledger and the embedding asset of each day since the load began (a soak may cross midnight), with their
    checks, in this process; each run's seconds."""
    instance = runner.dagster_instance(url)
    seconds = []
    days = [since + timedelta(days=n) for n in range((datetime.now(UTC).date() - since).days + 1)]
    for day in days:
        for key, partition in ((ledger_units.key, day.isoformat()),
                               (unit_embeddings.key, str(model_day_key(SERVING_MODEL, day)))):
            started = time.perf_counter()
            result = runner.materialize_asset(key, instance, partition_key=partition)
            assert result.success and all(e.passed for e in result.get_asset_check_evaluations()), key
            seconds.append(time.perf_counter() - started)
    return seconds


def seed_ledger(mem: Any, conn: psycopg.Connection[Any], embedder: Any, size: int) -> None:
    """Facts of writers no thread plays (numbers >= WRITERS), embedded: what recall answers from at the start."""
    candidates = [gates.validate(**fact(WRITERS + n % 8, 10_000 + n), task_id=f"T-seed-{n}") for n in range(size)]
    for first in range(0, size, 500):
        mem.remember_many(candidates[first: first + 500])
    embed_all(conn, embedder)


def check_ledger(conn: psycopg.Connection[Any], acks: list[Ack], where: str) -> dict[str, int]:
    """Every acknowledged write present exactly once, one live unit per content, gap-free numbers."""
    live = list(V.LIVE_STATUSES)
    duplicates = conn.execute("SELECT project, content_hash, count(*) FROM memory_units WHERE status = ANY (%s) "
                              "GROUP BY 1, 2 HAVING count(*) > 1", (live,)).fetchall()
    assert duplicates == [], f"{where}: duplicate live units {duplicates[:5]}"
    gaps = conn.execute("SELECT project, count(*), min(number), max(number), memory_last_number(project) "
                        "FROM memory_units GROUP BY project HAVING count(*) <> max(number) OR min(number) <> 1 "
                        "OR max(number) <> memory_last_number(project)").fetchall()
    assert gaps == [], f"{where}: unit numbers with gaps {gaps}"
    units = {(p, h): (number, status, unit_id) for p, h, number, status, unit_id in conn.execute(
        "SELECT project, content_hash, number, status, id FROM memory_units WHERE status = ANY (%s)", (live,))}
    sources = Counter(conn.execute("SELECT unit_id, task_id FROM memory_sources").fetchall())
    for ack in acks:
        unit = units.get((ack.project, ack.content_hash))
        assert unit is not None, f"{where}: acknowledged write lost {ack}"
        number, _, unit_id = unit
        assert ack.token is None or ack.token == f"{V.TOKEN_PREFIX}{number}", f"{where}: {ack} is mem-{number}"
        assert sources[(unit_id, ack.task_id)] == 1, f"{where}: {ack} has {sources[(unit_id, ack.task_id)]} sources"
    return {"live_units": len(units), "sources": sum(sources.values()),
            "acknowledged_contents": len({(a.project, a.content_hash) for a in acks})}


@pytest.mark.parametrize("per_writer, seed_size, alone_calls", [
    pytest.param(30, 100, 15, id="short"),
    pytest.param(500, 2000, 100, id="soak", marks=[pytest.mark.soak, pytest.mark.timeout(3600)])])
def test_sixteen_writers_four_recallers_and_a_materialisation_lose_and_duplicate_nothing(
        mem, conn, clean, embedder, stored_text, per_writer, seed_size, alone_calls, today):
    seed = int(os.environ.get("LOAD_SEED") or random.randrange(2**32))
    where = f"LOAD_SEED={seed}"
    rng = random.Random(seed)
    phases = {"started": time.perf_counter()}
    seed_ledger(mem, conn, embedder, seed_size)
    phases["seeded"] = time.perf_counter()
    alone, unexpected = recall_alone(clean, seed, alone_calls)
    phases["recalled_alone"] = time.perf_counter()
    assert unexpected == [], f"{where}: {unexpected[:5]}"

    plans = [plan(writer, per_writer, random.Random(rng.random())) for writer in range(WRITERS)]
    tallies = [Tally() for _ in range(WRITERS)]
    start = threading.Barrier(WRITERS + 1)
    writers = [threading.Thread(target=write, args=(clean, w, plans[w], tallies[w], start)) for w in range(WRITERS)]
    stop = threading.Event()
    under_load: list[float] = []
    recaller_errors: list[str] = []
    recallers = [threading.Thread(target=recall_loop, args=(clean, random.Random(seed + 100 + r), stop, under_load,
                                                             recaller_errors)) for r in range(RECALLERS)]

    def watch() -> None:  # the load ends with the last write: then the recallers stop too
        for thread in writers:
            thread.join()
        phases["written"] = time.perf_counter()
        stop.set()

    for thread in writers + recallers:
        thread.start()
    start.wait()
    began = time.perf_counter()
    watcher = threading.Thread(target=watch)
    watcher.start()
    runs: list[float] = []
    try:
        while not stop.is_set():
            runs += materialise(clean, today)  # the ledger and embedding assets run while the writers write
            stop.wait(MATERIALISE_PAUSE_S)  # a sensor's pace, not a loop holding the GIL
    finally:
        watcher.join()
        for thread in recallers:
            thread.join()
    written = phases["written"] - began
    phases["materialised_during_load"] = time.perf_counter()
    runs += materialise(clean, today)  # the bulk writers' last rows, and the last vectors
    phases["materialised_after"] = time.perf_counter()

    problems = [p for t in tallies for p in t.unexpected] + recaller_errors
    assert problems == [], f"{where}: {len(problems)} unexpected: {problems[:10]}"
    acks = [a for t in tallies for a in t.acks]
    sent = sum((t.sent for t in tallies), Counter())
    outcomes = sum((t.outcomes for t in tallies), Counter())
    assert sum(sent.values()) == WRITERS * per_writer and sent["fresh"] and sent["secret"] and sent["bad"]
    assert outcomes["ValidationError"] >= sent["bad"], f"{where}: {outcomes}"
    figures = check_ledger(conn, acks, where)
    text = stored_text() + stored_text(V.DAGSTER_DATABASE)  # the materialisations created the Dagster database
    leaked = [name for name, _, needle in SECRETS + SECRET_CORPUS if needle in text]
    assert leaked == [], f"{where}: secrets stored: {leaked}"
    vectors = conn.execute("SELECT count(*) FROM memory_units u WHERE status = 'active' AND NOT EXISTS "
                           "(SELECT 1 FROM memory_embeddings e WHERE e.unit_id = u.id)").fetchone()[0]
    assert vectors == 0, f"{where}: {vectors} active units without a vector after the last materialisation"
    phases["checked"] = time.perf_counter()
    steps = list(phases)
    seconds = {step: round(phases[step] - phases[before], 1) for before, step in itertools.pairwise(steps)}
    print(f"load {where}: seconds per phase {seconds}, materialisation runs {len(runs)}")  # shown with -s

    if per_writer >= 500:
        write_latencies = [s for t in tallies for s in t.latencies]
        record_reliability("load", "writers_recallers_materialisation", {
            "seed": seed, "writers": WRITERS, "candidates_per_writer": per_writer, "recallers": RECALLERS,
            "seeded_units": seed_size, "sent": dict(sent), "outcomes": dict(outcomes),
            "acknowledged_writes": len(acks), **figures, "lost": 0, "duplicate_live_units": 0, "gaps": 0,
            "secrets_stored": 0, "unexpected_exceptions": 0, "materialisation_runs": len(runs),
            "materialisation_s_median": round(statistics.median(runs), 2),
            "write_seconds": round(written, 1), "writes_per_second": round(WRITERS * per_writer / written, 1),
            "remember_latency": percentiles(write_latencies),
            "recall_alone": percentiles(alone), "recall_under_load": percentiles(under_load),
            "recall_p50_ratio": round(statistics.median(under_load) / statistics.median(alone), 2),
            "seconds_per_phase": seconds, "load_average": [round(x, 2) for x in os.getloadavg()],
            "note": "one run on a shared 2-core machine: compare the ratio, not the milliseconds"})
