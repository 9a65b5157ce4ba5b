"""The lifecycle commands: forget, confirm, flag, and the review queue."""

from __future__ import annotations

from collections.abc import Callable

import click

from memory_assets import vocabulary as V
from memory_assets.authz import Actor
from memory_assets.cli.common import MemoryGroup, emit, json_option, memory


@click.command()
@click.argument("token")
@click.option("--project", required=True)
@click.option("--reason", required=True, help="Why (kept in the audit log; never the text).")
@click.option("--actor", default="operator", show_default=True,
              help=f"Who forgets: must be one of the operators the deployment lists in {V.OPERATORS_ENV}.")
@json_option
def forget(token: str, project: str, reason: str, actor: str, as_json: bool) -> None:
    """Forget a unit for good: text blanked everywhere, vectors deleted, id and audit kept (operators only)."""
    operator = Actor.operator(project, actor)  # refused (exit 2) before any connection unless listed
    with memory() as mem:
        unit_id = mem.forget(project, token, operator, reason=reason)
    emit({"token": token, "unit_id": unit_id, "status": V.STATUS_FORGOTTEN}, as_json, f"{token}: forgotten")


def _vote(token: str, project: str, task_id: str, persona: str | None, value: int, as_json: bool) -> None:
    """Record one confirm (+1) or flag (-1) and print the unit's trust afterwards."""
    with memory() as mem:
        result = (mem.confirm if value > 0 else mem.flag)(project, token, task_id, persona=persona)
    if result.get(V.MEMORY_OFF):
        emit(result, as_json, f"{token}: memory is off (the kill switch): nothing recorded")
        return
    emit(result, as_json, f"{token}: trust {result['trust']} ({result['confirms']} confirms, {result['flags']} flags, "
                          f"{result['status']})")


def _vote_options(command: Callable[..., None]) -> Callable[..., None]:
    """The arguments confirm and flag share: a token, its project, the voting task, the persona it votes as."""
    for option in (json_option, click.option("--persona", help="Vote as this persona: its private units too."),
                   click.option("--task-id", required=True), click.option("--project", required=True),
                   click.argument("token")):
        command = option(command)
    return command


@click.command()
@_vote_options
def confirm(token: str, project: str, task_id: str, persona: str | None, as_json: bool) -> None:
    """Confirm a unit from a task (one vote per unit and task): trust rises."""
    _vote(token, project, task_id, persona, 1, as_json)


@click.command()
@_vote_options
def flag(token: str, project: str, task_id: str, persona: str | None, as_json: bool) -> None:
    """Flag a unit from a task (one vote per unit and task): trust falls; enough flags take it out of recall."""
    _vote(token, project, task_id, persona, -1, as_json)


@click.group(cls=MemoryGroup)
def review() -> None:
    """The review queue: contradictions and low-confidence units wait here for a human."""


@review.command("list")
@click.option("--project")
@click.option("--persona", help="Read as this persona: its private units in review are listed too.")
@json_option
def review_list(project: str | None, persona: str | None, as_json: bool) -> None:
    """Units in review that the reader may see, oldest first, with what they conflict with."""
    with memory() as mem:
        actor = Actor.reader(project, persona) if project else Actor.readers(tuple(mem.projects()), persona)
        queue = mem.review_queue(project, actor=actor)
    text = "\n".join(f"{r['project']} {r['token']} [{r['kind']}] {r['title']}"
                     + (f"  (conflicts with {r['conflicts_with']}: {r['conflict_title']})"
                        if r["conflicts_with"] else "")
                     for r in queue) or "review queue is empty"
    emit(queue, as_json, text)


@review.command("decide")
@click.argument("token")
@click.argument("decision", type=click.Choice(V.REVIEW_DECISIONS))
@click.argument("target", required=False)
@click.option("--project", required=True)
@click.option("--actor", default="reviewer", show_default=True)
@json_option
def review_decide(token: str, decision: str, target: str | None, project: str, actor: str, as_json: bool) -> None:
    """Approve, reject, or let TOKEN supersede TARGET (mem-<m>); every decision is audited."""
    with memory() as mem:
        result = mem.decide(project, token, decision, target, actor=actor)
    emit(result, as_json, f"{token}: {decision}" + (f" {target}" if target else ""))
