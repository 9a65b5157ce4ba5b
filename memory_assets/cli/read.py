"""The read commands: show one unit, count units, recall with citations."""

from __future__ import annotations

import click

from memory_assets import gates
from memory_assets import vocabulary as V
from memory_assets.authz import Actor
from memory_assets.cli.common import emit, json_option, memory, summary_text
from memory_assets.errors import ValidationError


@click.command()
@click.argument("token")
@click.option("--project", required=True)
@click.option("--persona", help="Read as this persona: its private units and sources are shown too.")
@json_option
def show(token: str, project: str, persona: str | None, as_json: bool) -> None:
    """Show one unit (mem-<n>) with the sources its reader may see."""
    with memory() as mem:
        unit = mem.unit(project, token, actor=Actor.reader(project, persona))
    if unit is None:
        raise ValidationError("token", f"no unit {token} in project {project}")
    text = (f"{unit['token']} [{unit['kind']}/{unit['type']}] {unit['status']}\n{unit['title']}\n\n{unit['body']}\n\n"
            + "\n".join(f"source: feed={s['feed']} task={s['task_id']} session={s['session_id']}"
                        for s in unit["sources"]))
    emit(unit, as_json, text)


@click.command()
@click.option("--project")
@json_option
def stats(project: str | None, as_json: bool) -> None:
    """Units by status and kind, rejections by reason."""
    with memory() as mem:
        data = mem.stats(project)
    emit(data, as_json, summary_text(data))


@click.command("recall")
@click.option("--project", required=True)
@click.option("--query", required=True)
@click.option("--k", default=V.RECALL_DEFAULT_K, show_default=True, type=int)
@click.option("--as-of", help="ISO 8601 time to recall as of (default: now).")
@click.option("--kind", "kinds", multiple=True)
@click.option("--type", "types", multiple=True)
@click.option("--path", "paths", multiple=True)
@click.option("--persona", help="Recall as this persona: the private units it contributed are included.")
@click.option("--prf/--no-prf", default=None, help="Pseudo-relevance feedback (default: the vocabulary's, off).")
@click.option("--second-round/--no-second-round", default=None,
              help="A second round seeded by the top hits' entities (default: the vocabulary's, off).")
@click.option("--rerank/--no-rerank", default=None,
              help=f"Re-score the top candidates with the cross-encoder in ${V.RERANKER_PATH_ENV} (default: off).")
@json_option
def recall_(project: str, query: str, k: int, as_of: str | None, kinds: tuple[str, ...], types: tuple[str, ...],
            paths: tuple[str, ...], persona: str | None, prf: bool | None, second_round: bool | None,
            rerank: bool | None, as_json: bool) -> None:
    """Hybrid recall with citations: the units of a project that best answer a query."""
    at = gates.iso_time("as_of", as_of, naive_is_utc=True) if as_of else None
    with memory() as mem:
        result = mem.recall(project, query, k, as_of=at, kinds=list(kinds) or None, types=list(types) or None,
                            paths=list(paths) or None, actor=Actor.reader(project, persona), prf=prf,
                            second_round=second_round, rerank=rerank)
    data = {"mode": result.mode, "notes": result.notes, "hits": [h.as_dict() for h in result.hits]}
    text = "\n".join([f"mode: {result.mode}"] + [
        f"{h.token} {h.score:.3f} [{h.kind}] {h.title}\n    {h.body[:160]}\n    cites: "
        + ", ".join(f"{c['feed']}/{c['task_id']}" for c in h.citations) for h in result.hits])
    emit(data, as_json, text)
