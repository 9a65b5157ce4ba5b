"""The evaluation commands: public benchmarks run against this memory."""

from __future__ import annotations

import json
from pathlib import Path

import click

from memory_assets import vocabulary as V
from memory_assets.cli.common import MemoryGroup, emit, json_option, memory
from memory_assets.errors import ValidationError
from memory_assets.evaluation import locomo


@click.group("eval", cls=MemoryGroup)
def eval_() -> None:
    """Evaluations against public benchmarks."""


def k_values_of(ks: str) -> list[int]:
    """The sorted k values of a comma-separated list, each a valid recall k, so a typo is bad input."""
    try:
        k_values = sorted({int(k) for k in ks.split(",")})
    except ValueError as error:
        raise ValidationError("k", f"comma-separated integers (got {ks!r})") from error
    if not all(1 <= k <= V.RECALL_MAX_K for k in k_values):
        raise ValidationError("k", f"each between 1 and {V.RECALL_MAX_K}")
    return k_values


@eval_.command("locomo")
@click.option("--data", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--units", type=click.Choice(["dialog", "observation"]), default="dialog", show_default=True)
@click.option("--k", "ks", default="1,5,10,25", show_default=True)
@click.option("--mode", type=click.Choice(["hybrid", "dense", "sparse"]), default="hybrid", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), help="Also write the JSON report here.")
@json_option
def eval_locomo(data: str, units: str, ks: str, mode: str, out: str | None, as_json: bool) -> None:
    """LoCoMo: recall of evidence dialog ids in the top k, per category, with latency, legs side by side."""
    k_values = k_values_of(ks)
    with memory() as mem:
        report = locomo.run(mem, Path(data), units, k_values, mode, log=lambda m: click.echo(m, err=True))
    if out:
        Path(out).write_text(json.dumps(report, indent=2) + "\n")
    emit(report, as_json, "\n".join(
        [f"LoCoMo {units} units, mode {mode}: {report['questions']} questions ({report['skipped']} skipped)"]
        + [f"  R@{k}: {v:.3f}" for k, v in report["recall_at"].items()]
        + [f"  side by side: {m} " + " ".join(f"@{k}={v:.3f}" for k, v in r.items())
           for m, r in report.get("side_by_side", {}).items()]
        + [(f"  latency p50 {report['latency_ms']['p50']} ms, p95 {report['latency_ms']['p95']} ms "
            f"(asked again, query vector cached: p50 {report['latency_cached_ms']['p50']} ms, "
            f"p95 {report['latency_cached_ms']['p95']} ms)")]))
