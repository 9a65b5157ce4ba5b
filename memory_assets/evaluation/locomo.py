"""LoCoMo retrieval evaluation: ingest conversations through the write path and the asset graph, then ask."""

from __future__ import annotations

import inspect
import json
import re
import statistics
import sys
import time
import types
import typing
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_assets import gates
from memory_assets import vocabulary as V
from memory_assets.api import Memory
from memory_assets.database import query
from memory_assets.defs import runner
from memory_assets.errors import ValidationError
from memory_assets.evaluation import folds
from memory_assets.recall import learned

CATEGORIES = (1, 2, 3, 4)  # 5 is adversarial: no evidence to retrieve
CATEGORY_NAMES = {1: "multi_hop", 2: "temporal", 3: "open_domain", 4: "single_hop"}
MODES = {"hybrid": "hybrid", "dense": "dense", "sparse": "sparse"}


@dataclass(frozen=True)
class Question:
    project: str
    text: str
    category: int
    evidence: frozenset[str]
    as_of: datetime


def session_time(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' as an aware UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def sessions(conversation: dict[str, Any]) -> list[tuple[int, datetime, list[dict[str, Any]]]]:
    numbers = sorted(int(m.group(1)) for key in conversation if (m := re.fullmatch(r"session_(\d+)", key)))
    return [(n, session_time(conversation[f"session_{n}_date_time"]), conversation[f"session_{n}"]) for n in numbers]


def project_of(sample: dict[str, Any], units: str) -> str:
    return f"locomo-{units}-{sample['sample_id']}"


def candidates(sample: dict[str, Any], units: str) -> list[gates.Candidate]:
    """Dialog turns as episodic notes, or observations as semantic notes, each citing its dialog id."""
    project = project_of(sample, units)
    conversation = sample["conversation"]
    rows = []
    for number, when, turns in sessions(conversation):
        session_id = f"{sample['sample_id']}:session_{number}"
        if units == "dialog":
            for turn in turns:
                text = f"{turn['speaker']}: {without_format_characters(turn['text'])}"
                if turn.get("blip_caption"):
                    text += f" [shares an image: {turn['blip_caption']}]"
                rows.append(gates.validate(
                    project=project, kind="note", type="episodic", title=one_line(text[:80]), body=text[:1200],
                    feed="locomo", task_id=f"{sample['sample_id']}:{turn['dia_id']}", session_id=session_id,
                    persona=turn["speaker"], source_ref=turn["dia_id"], valid_from=when, confidence=0.9))
        else:
            observations = sample["observation"].get(f"session_{number}_observation", {})
            for speaker, facts in observations.items():
                for i, (fact, dia_id) in enumerate(facts):
                    for ref in split_ids(dia_id if isinstance(dia_id, str) else ";".join(dia_id)):
                        rows.append(gates.validate(
                            project=project, kind="note", type="semantic", title=fact[:80], body=fact[:1200],
                            feed="locomo", task_id=f"{sample['sample_id']}:obs:{number}:{speaker}:{i}:{ref}",
                            session_id=session_id, persona=speaker, source_ref=ref, valid_from=when, confidence=0.9))
    return rows


def one_line(text: str) -> str:
    """A title on one line: the turn's line breaks (22 turns of the dev set) as spaces, which title gates require."""
    return " ".join(text.splitlines())


def without_format_characters(text: str) -> str:
    """The text without format characters (one emoji's zero-width joiner in the dev set), which the gates refuse."""
    return "".join(char for char in text if unicodedata.category(char) != "Cf")


def split_ids(raw: str) -> list[str]:
    return [part for part in re.split(r"[;,\s]+", raw or "") if part]


def questions(sample: dict[str, Any], units: str) -> tuple[list[Question], int]:
    """The sample's questions of categories 1-4 with evidence parsed; and how many were skipped (no evidence)."""
    known = {turn["dia_id"] for _, _, turns in sessions(sample["conversation"]) for turn in turns}
    as_of = max(when for _, when, _ in sessions(sample["conversation"])) + timedelta(days=1)
    kept, skipped = [], 0
    for qa in sample["qa"]:
        if qa.get("category") not in CATEGORIES:
            continue
        evidence = frozenset(e for raw in qa.get("evidence", []) for e in split_ids(raw) if e in known)
        if not evidence:
            skipped += 1
            continue
        kept.append(Question(project_of(sample, units), qa["question"], qa["category"], evidence, as_of))
    return kept, skipped


def ingest(mem: Memory, samples: list[dict[str, Any]], units: str,
           log: Callable[[str], None] = print) -> dict[str, Any]:
    """Write every unit through the gates into the inbox, then materialise the asset graph for today."""
    counts: dict[str, Any] = {"candidates": 0, "captured": 0, "rejected": {}}
    for sample in samples:
        rows = candidates(sample, units)
        result = mem.remember_many(rows, fold_now=False)
        counts["candidates"] += len(rows)
        counts["captured"] += result["captured"]
        for reason, n in result["rejected"].items():
            counts["rejected"][reason] = counts["rejected"].get(reason, 0) + n
    log(f"captured {counts['captured']} of {counts['candidates']} {units} units; materialising the asset graph")
    today = datetime.now(UTC).date()
    results = runner.materialize_day(today, runner.dagster_instance(mem.url))
    counts["runs"] = [r.run_id for r in results]
    return counts


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def evaluate(mem: Memory, qs: list[Question], ks: list[int], mode: str,
             settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """Recall of evidence dialog ids in the top k, overall and per category, with recall latency.

    `latency_ms` times each question asked the first time (encoding the query included); `latency_cached_ms` times
    it asked again right away, its vector served by the query cache: what the store and the fusion cost.
    """
    top = max(ks)
    per_question: list[tuple[int, dict[int, float]]] = []
    latencies: list[float] = []
    cached: list[float] = []
    for q in qs:
        for times in (latencies, cached):
            start = time.perf_counter()
            result = mem.recall(q.project, q.text, k=top, as_of=q.as_of, legs=MODES[mode], **(settings or {}))
            times.append((time.perf_counter() - start) * 1000)
        found_by_k: dict[int, float] = {}
        seen: set[str] = set()
        for rank, hit in enumerate(result.hits, start=1):
            seen |= {c["source_ref"] for c in hit.citations if c["source_ref"]}
            if rank in ks:
                found_by_k[rank] = len(seen & q.evidence) / len(q.evidence)
        for k in ks:
            found_by_k.setdefault(k, len(seen & q.evidence) / len(q.evidence))
        per_question.append((q.category, found_by_k))
    recall_at = {str(k): round(statistics.fmean(f[k] for _, f in per_question), 4) for k in ks}
    per_category = {
        CATEGORY_NAMES[c]: {str(k): round(statistics.fmean(f[k] for cat, f in per_question if cat == c), 4) for k in ks}
        for c in CATEGORIES if any(cat == c for cat, _ in per_question)
    }
    return {"mode": mode, "recall_at": recall_at, "per_category": per_category, "questions": len(qs),
            "latency_ms": latency_summary(latencies), "latency_cached_ms": latency_summary(cached)}


def latency_summary(latencies: list[float]) -> dict[str, Any]:
    return {"p50": round(percentile(latencies, 0.5), 2), "p95": round(percentile(latencies, 0.95), 2)}


def run(mem: Memory, data: Path, units: str, ks: list[int], mode: str, side_by_side: bool = True,
        log: Callable[[str], None] = print, *, settings: dict[str, Any] | None = None, model: str | None = None,
        with_folds: bool = False) -> dict[str, Any]:
    """The whole evaluation: ingest (then embed with `model` and serve it), ask with the recall `settings`, and
    report the asked mode (and the other legs side by side); `with_folds` adds the learned fusion's
    leave-one-conversation-out figures beside the in-sample ones."""
    qs, base = prepare(mem, data, (units,), model, log)[units]
    report = {**evaluated(mem, qs, ks, mode, settings, side_by_side), **base}
    if with_folds:
        asked = collect(mem, qs, units, mode, settings, log)
        report["out_of_fold"] = fold_report(asked, ks, folds.FEATURES)[units]
    return report


def prepare(mem: Memory, data: Path, kinds: tuple[str, ...], model: str | None,
            log: Callable[[str], None] = print) -> dict[str, tuple[list[Question], dict[str, Any]]]:
    """Ingest the data's units of each kind (then embed them all with `model` in one backfill and serve it): per
    kind, the questions and what the report says of the run."""
    samples = json.loads(Path(data).read_text())
    if model is not None:
        mem.embedding_model(model)  # an unknown key is bad input before anything is ingested
    ingested = {units: ingest(mem, samples, units, log) for units in kinds}
    served = serve_model(mem, model, log) if model is not None else None
    prepared = {}
    for units in kinds:
        if served is not None:
            ingested[units]["model"] = served
        qs, skipped = asked_questions(samples, units)
        prepared[units] = (qs, {"units": units, "skipped": skipped, "samples": len(samples),
                                "ingest": ingested[units], "data": Path(data).name,
                                "serving_model": mem.serving_model()})
    return prepared


def evaluated(mem: Memory, qs: list[Question], ks: list[int], mode: str, settings: dict[str, Any] | None,
              side_by_side: bool = True) -> dict[str, Any]:
    """The asked mode's figures with the settings, which fusion served them, and the other legs side by side."""
    report = evaluate(mem, qs, ks, mode, settings)
    report.update(fusion=fusion_in_use(), settings=settings or {})
    if side_by_side:
        report["side_by_side"] = {m: (report if m == mode else evaluate(mem, qs, ks, m, settings))["recall_at"]
                                  for m in MODES}
    return report


def fit_fusion(mem: Memory, data: Path, ks: list[int], out: Path | None, *, settings: dict[str, Any] | None = None,
               model: str | None = None, force: bool = False, command: str = "", side_by_side: bool = True,
               log: Callable[[str], None] = print) -> dict[str, Any]:
    """Fit the learned fusion on dialog and observation units of every conversation and judge it out of fold; write
    the weights file to `out` only when out-of-fold R@10 rises on both units against the hand-set formula (or
    `force`); report both units as `eval locomo --folds` does, their in-sample figures served by the model kept."""
    prepared = prepare(mem, data, ("dialog", "observation"), model, log)
    asked = [a for units, (qs, _) in prepared.items() for a in collect(mem, qs, units, "hybrid", settings, log)]
    log(f"fitting: {len(asked)} questions, leave one conversation out")
    sections = fold_report(asked, ks, folds.FEATURES)
    rises = {u: sections[u]["learned"]["recall_at"]["10"] > sections[u]["handset"]["recall_at"]["10"]
             for u in sections} if "10" in sections["dialog"]["learned"]["recall_at"] else {}
    kept = bool(rises) and all(rises.values())
    fitted = folds.fit(asked, folds.FEATURES, meta={
        "version": f"{datetime.now(UTC):%Y-%m-%d}.1", "fitted_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "data": {"file": Path(data).name, "units": ["dialog", "observation"], "questions": len(asked),
                 "conversations": sorted({a.conversation for a in asked})},
        "command": command, "method": sections["dialog"]["method"],
        "settings": settings or {}, "serving_model": mem.serving_model(),
        "figures": {u: {k: sections[u][k] for k in ("handset", "learned_in_sample", "learned")} for u in sections},
        "kept": kept, "rises_out_of_fold": rises})
    written = out is not None and (kept or force)
    if written and out is not None:
        learned.write(fitted, out)
    reports = {}
    with learned.using(fitted if written else None):
        for units, (qs, base) in prepared.items():
            reports[units] = {**evaluated(mem, qs, ks, "hybrid", settings, side_by_side), **base,
                              "out_of_fold": sections[units]}
            if written:
                reports[units]["fusion"] = f"learned {fitted.meta['version']}"
    return {"reports": reports, "kept": kept, "written": str(out) if written else None, "rises": rises,
            "model": fitted.as_dict()}


def asked_questions(samples: list[dict[str, Any]], units: str) -> tuple[list[Question], int]:
    """Every sample's scorable questions, and how many were skipped."""
    qs, skipped = [], 0
    for sample in samples:
        kept, dropped = questions(sample, units)
        qs += kept
        skipped += dropped
    return qs, skipped


def fusion_in_use() -> str:
    """Which final score recall uses in this process: the weights file's version, else the hand-set formula."""
    model, note = learned.load(learned.weights_path())
    if model is None:
        return "handset" + (f" ({note})" if note else "")
    return f"learned {model.meta.get('version', '?')}"


RECALL_OWN = ("self", "project", "query", "k", "as_of", "legs", "actor")  # what the evaluation sets itself


def recall_settings(pairs: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """NAME=VALUE pairs as keyword arguments of Memory.recall: the name one of its keyword parameters, the value
    parsed by its annotation (on/off/true/false, integers, floats, none where None is allowed, comma lists)."""
    parameters = inspect.signature(Memory.recall).parameters
    hints = typing.get_type_hints(Memory.recall, vars(sys.modules[Memory.__module__]))
    settable = [n for n, p in parameters.items() if n not in RECALL_OWN
                and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)]
    settings: dict[str, Any] = {}
    for pair in pairs:
        name, equals, raw = pair.partition("=")
        name = name.strip()
        if not equals or name not in settable:
            raise ValidationError("setting", f"NAME=VALUE with NAME among {', '.join(settable) or 'none'} "
                                             f"(got {gates.shown(name)})")
        settings[name] = setting_value(name, raw.strip(), hints.get(name, str))
    return settings


def setting_value(name: str, raw: str, hint: Any) -> Any:
    """One setting's value parsed by its parameter's annotation; ValidationError naming it when it does not parse."""
    allowed = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    word = raw.lower()
    if type(None) in allowed and word in ("none", "default", "auto"):
        return None
    for kind in allowed:
        origin = typing.get_origin(kind) or kind
        if kind is bool and word in ("on", "true", "yes", "1", "off", "false", "no", "0"):
            return word in ("on", "true", "yes", "1")
        try:
            if kind is int and re.fullmatch(r"[+-]?\d+", raw):
                return int(raw)
            if kind is float and raw and word not in ("nan", "inf", "-inf", "+inf", "infinity"):
                return float(raw)
        except ValueError:
            continue
        if kind is str and raw:
            return raw
        if origin in (list, tuple) and raw:
            return [part for part in raw.split(",") if part]
    raise ValidationError(name, f"cannot read {gates.shown(raw)} as {getattr(hint, '__name__', None) or hint}")


def serve_model(mem: Memory, model_key: str, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Embed every unit with a registered model through the asset graph (the unit_embeddings backfill of
    `memory-assets embed --model KEY --backfill --serve`) and make it the serving model."""
    key = mem.embedding_model(model_key)
    days = mem.days_with_units()
    log(f"backfilling unit_embeddings for {key} over {len(days)} day(s); then serving it")
    run_id = None
    if days:
        result = runner.backfill_embeddings(key, days[0], days[-1], runner.dagster_instance(mem.url))
        run_id = result.run_id
    mem.set_serving_model(key, actor="eval")
    return {"key": key, "run_id": run_id, "coverage": mem.embedding_coverage(key)}


def source_refs(mem: Memory, projects: list[str]) -> dict[str, frozenset[str]]:
    """Each unit of the projects with the source references its citations carry."""
    with mem.connection() as conn:
        rows = conn.execute(query("evaluation/source_refs"), {"projects": projects}).fetchall()
    return {str(unit_id): frozenset(refs) for unit_id, refs in rows}


def collect(mem: Memory, qs: list[Question], units: str, mode: str = "hybrid",
            settings: dict[str, Any] | None = None, log: Callable[[str], None] = print) -> list[folds.Asked]:
    """Ask every question once more, capturing all its candidates with their components (hand-set formula), so
    fusion models are fitted and scored offline on exactly what recall computes."""
    log(f"collecting every candidate's components for {len(qs)} {units} questions")
    refs_of = source_refs(mem, sorted({q.project for q in qs}))
    asked = []
    for q in qs:
        with learned.capturing() as captured, learned.using(None):
            mem.recall(q.project, q.text, k=V.RECALL_MAX_K, as_of=q.as_of, legs=MODES[mode], **(settings or {}))
        if not captured:  # no candidate at all: nothing to rank, every k finds nothing
            captured.append(([], [], []))
        asked.append(folds.asked_from(captured[-1], units, q.project.removeprefix(f"locomo-{units}-"), q.category,
                                      q.evidence, refs_of))
    return asked


def fold_report(asked: list[folds.Asked], ks: list[int], features: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Per units: the hand-set formula, the learned ranker fitted on every conversation (in sample) and the learned
    ranker of each conversation fitted on the others (out of fold), R@k overall and per category."""
    handset = folds.split(asked, [a.handset for a in asked], ks)
    whole = folds.fit(asked, features)
    in_sample = folds.split(asked, folds.model_scores(whole, asked), ks)
    held = folds.out_of_fold(asked, features, ks)
    conversations = sorted({a.conversation for a in asked})
    return {units: {
        "method": (f"leave one conversation out over {len(conversations)} conversations: each conversation's "
                   "questions ranked by a linear ranker fitted on the others' (coordinate ascent on recall, "
                   "evaluation/folds.py); "
                   "candidates and components as recall computes them, collected once at k=RECALL_MAX_K"),
        "units_fitted": sorted({a.units for a in asked}), "features": list(features),
        "handset": handset[units], "learned_in_sample": in_sample[units], "learned": held["per_units"][units],
        "per_conversation": {c: held["per_conversation"][c].get(units) for c in conversations}}
        for units in handset}
