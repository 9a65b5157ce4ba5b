"""The evaluation commands: public benchmarks run against this memory."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import click

from memory_assets import gates
from memory_assets import vocabulary as V
from memory_assets.cli.common import MemoryGroup, emit, json_option, memory
from memory_assets.errors import ValidationError
from memory_assets.evaluation import locomo
from memory_assets.recall import learned


@click.group("eval", cls=MemoryGroup)
def eval_() -> None:
    """Evaluations against public benchmarks."""


def k_values_of(ks: str) -> list[int]:
    """The sorted k values of a comma-separated list, each a valid recall k, so a typo is bad input."""
    try:
        k_values = sorted({int(k) for k in ks.split(",")})
    except ValueError as error:
        raise ValidationError("k", f"comma-separated integers (got {gates.shown(ks)})") from error
    if not all(1 <= k <= V.RECALL_MAX_K for k in k_values):
        raise ValidationError("k", f"each between 1 and {V.RECALL_MAX_K}")
    return k_values


def summary(report: dict[str, Any]) -> list[str]:
    """A LoCoMo report as text: R@k, the legs side by side, latency, and the folds when asked."""
    lines = [f"LoCoMo {report['units']} units, mode {report['mode']}: {report['questions']} questions "
             f"({report['skipped']} skipped); fusion {report.get('fusion', 'handset')}"]
    lines += [f"  R@{k}: {v:.3f}" for k, v in report["recall_at"].items()]
    lines += [f"  side by side: {m} " + " ".join(f"@{k}={v:.3f}" for k, v in r.items())
              for m, r in report.get("side_by_side", {}).items()]
    lines += [(f"  latency p50 {report['latency_ms']['p50']} ms, p95 {report['latency_ms']['p95']} ms "
               f"(asked again, query vector cached: p50 {report['latency_cached_ms']['p50']} ms, "
               f"p95 {report['latency_cached_ms']['p95']} ms)")]
    folds = report.get("out_of_fold")
    if folds:
        for label, key in (("hand-set", "handset"), ("learned, in sample", "learned_in_sample"),
                           ("learned, out of fold", "learned")):
            lines.append(f"  {label}: " + " ".join(f"@{k}={v:.3f}" for k, v in folds[key]["recall_at"].items())
                         + " | R@10 " + " ".join(f"{c}={r.get('10', 0):.3f}"
                                                   for c, r in folds[key]["per_category"].items()))
    return lines


settings_option = click.option(
    "--setting", "settings", multiple=True, metavar="NAME=VALUE",
    help="A keyword option of Memory.recall for every question (repeatable): on/off, numbers, none.")
model_option = click.option("--model", "model_key", help="After ingest, backfill unit_embeddings with this "
                                                         "registered model and make it serving before asking.")


@eval_.command("locomo")
@click.option("--data", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--units", type=click.Choice(["dialog", "observation"]), default="dialog", show_default=True)
@click.option("--k", "ks", default="1,5,10,25", show_default=True)
@click.option("--mode", type=click.Choice(["hybrid", "dense", "sparse"]), default="hybrid", show_default=True)
@click.option("--folds", "with_folds", is_flag=True,
              help="Also report learned fusion leave-one-conversation-out (fitted on the other conversations).")
@settings_option
@model_option
@click.option("--out", type=click.Path(dir_okay=False), help="Also write the JSON report here.")
@json_option
def eval_locomo(data: str, units: str, ks: str, mode: str, with_folds: bool, settings: tuple[str, ...],
                model_key: str | None, out: str | None, as_json: bool) -> None:
    """LoCoMo: recall of evidence dialog ids in the top k, per category, with latency, legs side by side."""
    k_values = k_values_of(ks)
    options = locomo.recall_settings(settings)
    with memory() as mem:
        report = locomo.run(mem, Path(data), units, k_values, mode, log=lambda m: click.echo(m, err=True),
                            settings=options, model=model_key, with_folds=with_folds)
    if out:
        Path(out).write_text(json.dumps(report, indent=2, default=str) + "\n")
    emit(report, as_json, "\n".join(summary(report)))


@eval_.command("fit-fusion")
@click.option("--data", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--k", "ks", default="1,5,10,25", show_default=True)
@click.option("--out", default=str(learned.PACKAGED), show_default=True, type=click.Path(dir_okay=False),
              help="The weights file to write (recall reads the packaged one).")
@click.option("--results", type=click.Path(file_okay=False),
              help="Also write locomo_dialog.json and locomo_observation.json (with out_of_fold) here.")
@click.option("--force", is_flag=True, help="Write the weights even when out-of-fold R@10 does not rise.")
@click.option("--side-by-side/--no-side-by-side", default=True, show_default=True,
              help="Also ask every question with the dense and the sparse leg alone.")
@settings_option
@model_option
@json_option
@click.pass_context
def eval_fit_fusion(ctx: click.Context, data: str, ks: str, out: str, results: str | None, force: bool,
                    side_by_side: bool, settings: tuple[str, ...], model_key: str | None, as_json: bool) -> None:
    """Fit learned fusion on LoCoMo dialog + observation units, judged leave one conversation out; the weights are
    written only when out-of-fold R@10 rises on both against the hand-set formula (or --force)."""
    k_values = k_values_of(ks)
    if 10 not in k_values:
        raise ValidationError("k", "must include 10 (the figure that decides whether the weights are kept)")
    options = locomo.recall_settings(settings)
    command = "memory-assets eval fit-fusion " + " ".join(
        shlex.quote(a) for a in sys.argv[3:]) if sys.argv[1:3] == ["eval", "fit-fusion"] else ctx.command_path
    with memory() as mem:
        fitted = locomo.fit_fusion(mem, Path(data), k_values, Path(out), settings=options, model=model_key,
                                   force=force, command=command, side_by_side=side_by_side,
                                   log=lambda m: click.echo(m, err=True))
    if results:
        for units, report in fitted["reports"].items():
            (Path(results) / f"locomo_{units}.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    text = [line for report in fitted["reports"].values() for line in summary(report)]
    text.append(f"weights {'written to ' + fitted['written'] if fitted['written'] else 'not written'}: "
                f"out-of-fold R@10 rises {fitted['rises']}")
    emit({k: v for k, v in fitted.items() if k != "reports"} | {"reports": fitted["reports"]}, as_json,
         "\n".join(text))
