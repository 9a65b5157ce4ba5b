"""The `memory-assets` command line: remember, import, show, stats, materialize and the Dagster UI."""

from __future__ import annotations

import json
import os
import sys
from datetime import date, datetime, timezone
from pathlib import Path

import click

from memory_assets import gates
from memory_assets import vocabulary as V
from memory_assets.authz import Actor
from memory_assets.gates import ValidationError

EXIT_BAD_INPUT = 2
IMPORT_BATCH = 1000
CANDIDATE_FIELDS = ("project", "kind", "type", "title", "body", "paths", "keywords", "confidence", "importance",
                    "feed", "task_id", "session_id", "persona", "model", "observed_sha", "source_ref", "source_text",
                    "valid_from", "visibility")


def fail(message: str) -> None:
    """Bad input: the message on stderr and exit code 2."""
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)


def emit(data, as_json: bool, text: str | None = None) -> None:
    if as_json:
        click.echo(json.dumps(data, default=str, indent=2, sort_keys=True))
    else:
        click.echo(text if text is not None else json.dumps(data, default=str, indent=2))


def memory():
    import memory_assets

    return memory_assets.connect()


def candidate_from(fields: dict, default_project: str | None = None):
    """A validated Candidate from a dict of remember fields (unknown fields are bad input)."""
    unknown = sorted(set(fields) - set(CANDIDATE_FIELDS))
    if unknown:
        raise ValidationError(unknown[0], f"unknown field (known: {', '.join(CANDIDATE_FIELDS)})")
    fields = dict(fields)
    fields.setdefault("project", default_project)
    if isinstance(fields.get("valid_from"), str):
        fields["valid_from"] = gates.iso_time("valid_from", fields["valid_from"])
    for name in ("project", "kind", "type", "title", "body"):
        fields.setdefault(name, None)
    return gates.validate(**fields)


@click.group()
def main() -> None:
    """Long-term memory for AI agents on PostgreSQL + pgvector, run as a Dagster asset graph."""


@main.command()
@click.option("--project")
@click.option("--kind", type=str)
@click.option("--type", "type_", type=str)
@click.option("--title")
@click.option("--body")
@click.option("--path", "paths", multiple=True, help="Repeat for several paths.")
@click.option("--keyword", "keywords", multiple=True, help="Repeat for several keywords.")
@click.option("--confidence", type=float)
@click.option("--importance", type=float)
@click.option("--feed")
@click.option("--task-id")
@click.option("--session-id")
@click.option("--persona")
@click.option("--model")
@click.option("--observed-sha")
@click.option("--source-ref")
@click.option("--supersedes", help="Token of the unit this one replaces (kept as history).")
@click.option("--private", is_flag=True, help="Only the contributing --persona may recall it; never bundled.")
@click.option("--source-file", type=click.Path(dir_okay=False), help="File the body was learned from (verbatim gate).")
@click.option("--json-file", type=click.Path(dir_okay=False), help="Read the fields from a JSON object instead.")
@click.option("--json", "as_json", is_flag=True)
def remember(project, kind, type_, title, body, paths, keywords, confidence, importance, feed, task_id, session_id,
             persona, model, observed_sha, source_ref, supersedes, private, source_file, json_file, as_json):
    """Remember one unit through the gates; prints its status and token."""
    from memory_assets import ledger

    fields = {}
    if json_file:
        fields = _read_json_object(json_file)
    flags = {"project": project, "kind": kind, "type": type_, "title": title, "body": body,
             "paths": list(paths) or None, "keywords": list(keywords) or None, "confidence": confidence,
             "importance": importance, "feed": feed, "task_id": task_id, "session_id": session_id,
             "persona": persona, "model": model, "observed_sha": observed_sha, "source_ref": source_ref}
    fields.update({k: v for k, v in flags.items() if v is not None})
    if private:
        fields["visibility"] = V.VISIBILITY_PRIVATE
    if source_file:
        fields["source_text"] = _read_text(source_file, "source_file")
    try:
        candidate = candidate_from(fields)
    except ValidationError as error:
        fail(str(error))
    with memory() as mem, mem.connection() as conn:
        try:
            result = ledger.remember(conn, candidate, supersedes=supersedes)
        except ValidationError as error:
            fail(str(error))
    data = {"status": result.status, "token": result.token, "unit_id": result.unit_id, "reason": result.reason}
    emit(data, as_json, f"{result.status} {result.token or result.reason}")


def _read_text(path: str, field_name: str) -> str:
    try:
        return Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        fail(f"{field_name}: must be valid UTF-8 (byte {error.start})")
    except OSError as error:
        fail(f"{field_name}: cannot read {path}: {error.strerror}")


def _read_json_object(path: str) -> dict:
    try:
        data = json.loads(_read_text(path, "json_file"))
    except json.JSONDecodeError as error:
        fail(f"json_file: not valid JSON ({error.msg} at line {error.lineno})")
    if not isinstance(data, dict):
        fail("json_file: must hold one JSON object")
    return data


@main.command("import")
@click.argument("file", type=click.Path(dir_okay=False, exists=True))
@click.option("--project", help="Project for lines that name none.")
@click.option("--no-fold", is_flag=True, help="Leave the rows in the inbox for the ledger sensor to fold.")
@click.option("--json", "as_json", is_flag=True)
def import_(file, project, no_fold, as_json):
    """Import a JSON-lines file through the same gates; a bad line is reported by number and the rest imports."""
    from tqdm import tqdm

    from memory_assets import ledger

    errors: list[str] = []
    totals = {"lines": 0, "captured": 0, "inserted": 0, "rejected": {}}
    batch = []

    def flush(conn):
        if batch:
            counts = ledger.remember_many(conn, batch, fold_now=not no_fold)
            totals["captured"] += counts["captured"]
            totals["inserted"] += counts["inserted"]
            for reason, n in counts["rejected"].items():
                totals["rejected"][reason] = totals["rejected"].get(reason, 0) + n
            batch.clear()

    with memory() as mem, mem.connection() as conn, open(file, "rb") as handle:
        for number, raw in enumerate(tqdm(handle, desc="import", unit="line", disable=None), start=1):
            totals["lines"] += 1
            if not raw.strip():
                continue
            try:
                fields = json.loads(raw.decode("utf-8"))
                if not isinstance(fields, dict):
                    raise ValidationError("line", "must be a JSON object")
                batch.append(candidate_from(fields, project))
            except UnicodeDecodeError as error:
                errors.append(f"line {number}: not valid UTF-8 (byte {error.start})")
            except json.JSONDecodeError as error:
                errors.append(f"line {number}: not valid JSON ({error.msg})")
            except ValidationError as error:
                errors.append(f"line {number}: {error}")
            if len(batch) >= IMPORT_BATCH:
                flush(conn)
        flush(conn)
    totals["errors"] = errors
    emit(totals, as_json, f"imported {totals['captured']} of {totals['lines']} lines "
                          f"({totals['inserted']} new units, rejected {totals['rejected']}, {len(errors)} bad lines)")
    for error in errors:
        click.echo(f"error: {error}", err=True)
    if errors:
        sys.exit(EXIT_BAD_INPUT)


@main.command()
@click.argument("token")
@click.option("--project", required=True)
@click.option("--json", "as_json", is_flag=True)
def show(token, project, as_json):
    """Show one unit (mem-<n>) with its sources."""
    from memory_assets import ledger

    try:
        ledger.number_of(token)
    except ValidationError as error:
        fail(str(error))
    with memory() as mem:
        unit = mem.unit(project, token)
    if unit is None:
        fail(f"token: no unit {token} in project {project}")
    text = (f"{unit['token']} [{unit['kind']}/{unit['type']}] {unit['status']}\n{unit['title']}\n\n{unit['body']}\n\n"
            + "\n".join(f"source: feed={s['feed']} task={s['task_id']} session={s['session_id']}"
                        for s in unit["sources"]))
    emit(unit, as_json, text)


@main.command()
@click.option("--project")
@click.option("--json", "as_json", is_flag=True)
def stats(project, as_json):
    """Units by status and kind, rejections by reason."""
    with memory() as mem:
        data = mem.stats(project)
    emit(data, as_json, summary_text(data))


def summary_text(data: dict) -> str:
    lines = ["units by status:"]
    lines += [f"  {status:<12} {count}" for status, count in data["units_by_status"].items()] or ["  (none)"]
    lines.append("rejections by reason:")
    lines += [f"  {reason:<22} {count}" for reason, count in data["rejections_by_reason"].items()] or ["  (none)"]
    return "\n".join(lines)


@main.command()
@click.option("--date", "day", help="UTC day YYYY-MM-DD (default: today).")
@click.option("--json", "as_json", is_flag=True)
def materialize(day, as_json):
    """Materialise the whole asset graph for one day in this process, on the UI's Dagster instance."""
    from memory_assets import orchestration

    try:
        target = date.fromisoformat(day) if day else datetime.now(timezone.utc).date()
    except ValueError:
        fail(f"date: must be YYYY-MM-DD (got {day!r})")
    with memory() as mem:
        results = orchestration.materialize_day(target, orchestration.dagster_instance(mem.url))
        data = {"date": target.isoformat(), "success": all(r.success for r in results),
                "runs": [r.run_id for r in results],
                "checks": {e.check_name: e.passed for r in results for e in r.get_asset_check_evaluations()},
                **mem.stats()}
    emit(data, as_json, f"materialized {target} ({len(results)} runs): checks "
                        + ", ".join(f"{k}={'pass' if v else 'FAIL'}" for k, v in data["checks"].items())
                        + "\n" + summary_text(data))
    if not data["success"]:
        sys.exit(1)


@main.command()
@click.option("--model", "model_key", help="Model key (default: the serving model).")
@click.option("--backfill", is_flag=True, help="Embed every day's units for this model (resumable).")
@click.option("--serve", is_flag=True, help="Make this model the serving model afterwards.")
@click.option("--json", "as_json", is_flag=True)
def embed(model_key, backfill, serve, as_json):
    """Embed units: the changes since this model's journal cursor, or with --backfill all history by day."""
    from tqdm import tqdm

    from memory_assets import embeddings, orchestration

    with memory() as mem, mem.connection() as conn:
        model_key = model_key or embeddings.serving_model(conn)
        try:
            embedder = embeddings.embedder_for(model_key)
        except ValidationError as error:
            fail(str(error))
        if backfill:
            days = embeddings.days_with_units(conn)
            totals = {"days": len(days), "embedded": 0, "written": 0}
            if days:
                result = orchestration.backfill_embeddings(model_key, days[0], days[-1],
                                                           orchestration.dagster_instance(mem.url))
                metadata = result.get_asset_materialization_events()[0].materialization.metadata
                totals.update(run_id=result.run_id, embedded=metadata["embedded"].value,
                              written=metadata["written"].value)
        else:
            with tqdm(desc=f"embed {model_key}", unit="change", disable=None) as bar:
                totals = embeddings.embed_changes(conn, embedder, progress=bar.update)
        if serve:
            embeddings.set_serving_model(conn, model_key, actor="cli")
        totals.update(model=model_key, serving=embeddings.serving_model(conn),
                      coverage=embeddings.coverage(conn, model_key))
    emit(totals, as_json)


@main.command()
@click.argument("token")
@click.option("--project", required=True)
@click.option("--reason", required=True, help="Why (kept in the audit log; never the text).")
@click.option("--actor", default="operator", show_default=True)
@click.option("--json", "as_json", is_flag=True)
def forget(token, project, reason, actor, as_json):
    """Forget a unit for good: text blanked everywhere, vectors deleted, id and audit kept."""
    with memory() as mem:
        try:
            unit_id = mem.forget(project, token, Actor.for_project(project, actor, forget=True), reason=reason)
        except ValidationError as error:
            fail(str(error))
    emit({"token": token, "unit_id": unit_id, "status": "forgotten"}, as_json, f"{token}: forgotten")


def _vote(token, project, task_id, value, as_json):
    with memory() as mem:
        try:
            result = (mem.confirm if value > 0 else mem.flag)(project, token, task_id)
        except ValidationError as error:
            fail(str(error))
    emit(result, as_json, f"{token}: trust {result['trust']} ({result['confirms']} confirms, {result['flags']} flags, "
                          f"{result['status']})")


def _vote_options(command):
    """The arguments confirm and flag share: a token, its project, the voting task."""
    for option in (click.option("--json", "as_json", is_flag=True), click.option("--task-id", required=True),
                   click.option("--project", required=True), click.argument("token")):
        command = option(command)
    return command


@main.command()
@_vote_options
def confirm(token, project, task_id, as_json):
    """Confirm a unit from a task (one vote per unit and task): trust rises."""
    _vote(token, project, task_id, 1, as_json)


@main.command()
@_vote_options
def flag(token, project, task_id, as_json):
    """Flag a unit from a task (one vote per unit and task): trust falls; enough flags take it out of recall."""
    _vote(token, project, task_id, -1, as_json)


@main.group()
def review() -> None:
    """The review queue: contradictions and low-confidence units wait here for a human."""


@review.command("list")
@click.option("--project")
@click.option("--json", "as_json", is_flag=True)
def review_list(project, as_json):
    """Units in review, oldest first, with what they conflict with."""
    with memory() as mem:
        queue = mem.review_queue(project)
    text = "\n".join(f"{r['project']} {r['token']} [{r['kind']}] {r['title']}"
                     + (f"  (conflicts with {r['conflicts_with']}: {r['conflict_title']})" if r["conflicts_with"] else "")
                     for r in queue) or "review queue is empty"
    emit(queue, as_json, text)


@review.command("decide")
@click.argument("token")
@click.argument("decision", type=click.Choice(V.REVIEW_DECISIONS))
@click.argument("target", required=False)
@click.option("--project", required=True)
@click.option("--actor", default="reviewer", show_default=True)
@click.option("--json", "as_json", is_flag=True)
def review_decide(token, decision, target, project, actor, as_json):
    """Approve, reject, or let TOKEN supersede TARGET (mem-<m>); every decision is audited."""
    with memory() as mem:
        try:
            result = mem.decide(project, token, decision, target, actor=actor)
        except ValidationError as error:
            fail(str(error))
    emit(result, as_json, f"{token}: {decision}" + (f" {target}" if target else ""))


@main.command("recall")
@click.option("--project", required=True)
@click.option("--query", required=True)
@click.option("--k", default=V.RECALL_DEFAULT_K, show_default=True, type=int)
@click.option("--as-of", help="ISO 8601 time to recall as of (default: now).")
@click.option("--kind", "kinds", multiple=True)
@click.option("--type", "types", multiple=True)
@click.option("--path", "paths", multiple=True)
@click.option("--persona", help="Recall as this persona: the private units it contributed are included.")
@click.option("--json", "as_json", is_flag=True)
def recall_(project, query, k, as_of, kinds, types, paths, persona, as_json):
    """Hybrid recall with citations: the units of a project that best answer a query."""
    with memory() as mem:
        try:
            at = gates.iso_time("as_of", as_of, naive_is_utc=True) if as_of else None
            result = mem.recall(project, query, k, as_of=at, kinds=list(kinds) or None, types=list(types) or None,
                                paths=list(paths) or None,
                                actor=Actor.reader(project, persona))
        except ValidationError as error:
            fail(str(error))
    data = {"mode": result.mode, "notes": result.notes, "hits": [h.as_dict() for h in result.hits]}
    text = "\n".join([f"mode: {result.mode}"] + [
        f"{h.token} {h.score:.3f} [{h.kind}] {h.title}\n    {h.body[:160]}\n    cites: "
        + ", ".join(f"{c['feed']}/{c['task_id']}" for c in h.citations) for h in result.hits])
    emit(data, as_json, text)


@main.group("eval")
def eval_() -> None:
    """Evaluations against public benchmarks."""


@eval_.command("locomo")
@click.option("--data", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--units", type=click.Choice(["dialog", "observation"]), default="dialog", show_default=True)
@click.option("--k", "ks", default="1,5,10,25", show_default=True)
@click.option("--mode", type=click.Choice(["hybrid", "dense", "sparse"]), default="hybrid", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), help="Also write the JSON report here.")
@click.option("--json", "as_json", is_flag=True)
def eval_locomo(data, units, ks, mode, out, as_json):
    """LoCoMo: recall of evidence dialog ids in the top k, per category, with latency, legs side by side."""
    from memory_assets.evaluation import locomo

    try:
        k_values = sorted({int(k) for k in ks.split(",")})
    except ValueError:
        fail(f"k: comma-separated integers (got {ks!r})")
    if not all(1 <= k <= V.RECALL_MAX_K for k in k_values):
        fail(f"k: each between 1 and {V.RECALL_MAX_K}")
    with memory() as mem:
        report = locomo.run(mem, Path(data), units, k_values, mode, log=lambda m: click.echo(m, err=True))
    if out:
        Path(out).write_text(json.dumps(report, indent=2) + "\n")
    emit(report, as_json, "\n".join(
        [f"LoCoMo {units} units, mode {mode}: {report['questions']} questions ({report['skipped']} skipped)"]
        + [f"  R@{k}: {v:.3f}" for k, v in report["recall_at"].items()]
        + [f"  side by side: {m} " + " ".join(f"@{k}={v:.3f}" for k, v in r.items())
           for m, r in report.get("side_by_side", {}).items()]
        + [f"  latency p50 {report['latency_ms']['p50']} ms, p95 {report['latency_ms']['p95']} ms "
           f"(asked again, query vector cached: p50 {report['latency_cached_ms']['p50']} ms, "
           f"p95 {report['latency_cached_ms']['p95']} ms)"]))


@main.command()
def mcp():
    """Serve the MCP tools (remember, recall, forget, confirm, flag, cite) over stdio."""
    from memory_assets import mcp_server

    mcp_server.main()


DEMO_FILE = Path(__file__).parent / "demo" / "demo_units.jsonl"
DEMO_QUERY = "how do I connect to the staging database?"


@main.command()
@click.pass_context
def demo(ctx):
    """Load the demo corpus into the inbox through the public write path, then materialise today's graph."""
    click.echo(f"importing {DEMO_FILE.name} into the inbox (the ledger asset folds it)")
    ctx.invoke(import_, file=str(DEMO_FILE), project=None, no_fold=True, as_json=False)
    ctx.invoke(materialize, day=None, as_json=False)
    click.echo(f"\nrecall --project acme --query {DEMO_QUERY!r}")
    ctx.invoke(recall_, project="acme", query=DEMO_QUERY, k=3, as_of=None, kinds=(), types=(), paths=(), as_json=False)


@main.command()
@click.option("--port", default=3000, show_default=True)
def dev(port):
    """Open the Dagster UI (webserver + daemon) with Dagster's storage in the memory server."""
    import subprocess

    from memory_assets import orchestration

    with memory() as mem:
        env = dict(os.environ, DAGSTER_HOME=str(orchestration.dagster_home(mem.url)))
        if not os.environ.get(V.DATABASE_URL_ENV):
            env[V.DATABASE_URL_ENV] = mem.url  # code servers attach to the server this process holds
        command = [sys.executable, "-m", "dagster", "dev", "-m", "memory_assets.definitions", "-p", str(port)]
        sys.exit(subprocess.call(command, env=env))


if __name__ == "__main__":
    main()
