"""The operator commands: materialise the asset graph, embed, the Dagster UI, the demo and the MCP server."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import click
from tqdm import tqdm

from memory_assets import database, embeddings, gates
from memory_assets import vocabulary as V
from memory_assets.cli.common import emit, json_option, memory, summary_text
from memory_assets.cli.read import recall_
from memory_assets.cli.write import import_
from memory_assets.defs import runner
from memory_assets.errors import ValidationError

log = logging.getLogger(__name__)

DEMO_FILE = Path(__file__).parent.parent / "demo" / "demo_units.jsonl"
DEMO_QUERY = "how do I connect to the staging database?"


@click.command()
@click.option("--date", "day", help="UTC day YYYY-MM-DD (default: today).")
@json_option
@click.pass_context
def materialize(ctx: click.Context, day: str | None, as_json: bool) -> None:
    """Materialise the whole asset graph for one day in this process, on the UI's Dagster instance."""
    try:
        target = date.fromisoformat(day) if day else datetime.now(UTC).date()
    except ValueError as error:
        raise ValidationError("date", f"must be YYYY-MM-DD (got {gates.shown(day)})") from error
    with memory() as mem:
        results = runner.materialize_day(target, runner.dagster_instance(mem.url))
        data = {"date": target.isoformat(), "success": all(r.success for r in results),
                "runs": [r.run_id for r in results],
                "checks": {e.check_name: e.passed for r in results for e in r.get_asset_check_evaluations()},
                **mem.stats()}
    emit(data, as_json, f"materialized {target} ({len(results)} runs): checks "
                        + ", ".join(f"{k}={'pass' if v else 'FAIL'}" for k, v in data["checks"].items())
                        + "\n" + summary_text(data))
    if not data["success"]:
        ctx.exit(1)


@click.command()
@click.option("--model", "model_key", help="Model key (default: the serving model).")
@click.option("--backfill", is_flag=True, help="Embed every day's units for this model (resumable).")
@click.option("--serve", is_flag=True, help="Make this model the serving model afterwards.")
@json_option
def embed(model_key: str | None, backfill: bool, serve: bool, as_json: bool) -> None:
    """Embed units: the changes since this model's journal cursor, or with --backfill all history by day."""
    with memory() as mem:
        key = mem.embedding_model(model_key or None)
        totals: dict[str, Any]
        if backfill:
            days = mem.days_with_units()
            totals = {"days": len(days), "embedded": 0, "written": 0}
            if days:
                result = runner.backfill_embeddings(key, days[0], days[-1], runner.dagster_instance(mem.url))
                metadata = result.get_asset_materialization_events()[0].materialization.metadata
                totals.update(run_id=result.run_id, embedded=metadata["embedded"].value,
                              written=metadata["written"].value)
        else:
            with tqdm(desc=f"embed {key}", unit="change", disable=None) as bar:
                totals = dict(mem.embed_changes(key, progress=bar.update))
        if serve:
            mem.set_serving_model(key, actor="cli")
        totals.update(model=key, serving=mem.serving_model(), coverage=mem.embedding_coverage(key))
    emit(totals, as_json)


@click.command()
@click.pass_context
def demo(ctx: click.Context) -> None:
    """Load the demo corpus into the inbox through the public write path, then materialise today's graph."""
    click.echo(f"importing {DEMO_FILE.name} into the inbox (the ledger asset folds it)")
    ctx.invoke(import_, file=str(DEMO_FILE), project=None, no_fold=True, as_json=False)
    ctx.invoke(materialize, day=None, as_json=False)
    click.echo(f"\nrecall --project acme --query {DEMO_QUERY!r}")
    ctx.invoke(recall_, project="acme", query=DEMO_QUERY, k=3, as_of=None, kinds=(), types=(), paths=(),
               persona=None, as_json=False)


@click.command()
@click.option("--port", default=3000, show_default=True)
@click.pass_context
def dev(ctx: click.Context, port: int) -> None:
    """Open the Dagster UI (webserver + daemon) with Dagster's storage in the memory server."""
    with memory() as mem:
        env = dict(os.environ, DAGSTER_HOME=str(runner.dagster_home(mem.url)))
        if not os.environ.get(V.DATABASE_URL_ENV):
            env[V.DATABASE_URL_ENV] = mem.url  # code servers attach to the server this process holds
        # the ONNX export made now (once per home), not by the first run the embedding sensor requests
        embeddings.onnx_encoder(embeddings.model_spec(mem.serving_model()), "fp32")
        command = [sys.executable, "-m", "dagster", "dev", "-m", "memory_assets.definitions", "-p", str(port)]
        ctx.exit(watch(subprocess.Popen(command, env=env), mem.url))


def watch(process: subprocess.Popen[bytes], url: str) -> int:
    """Wait for `process` while restarting the embedded server this process holds whenever it crashes, so the UI,
    the daemon and the code servers (which only attach to it) reconnect instead of failing until a restart. A SIGTERM
    (a supervisor, a plain `kill`) is passed on as the SIGINT `dagster dev` stops on, never leaving it orphaned."""
    stopping = signal.signal(signal.SIGTERM, lambda *_: process.send_signal(signal.SIGINT))
    try:
        while True:
            try:
                return process.wait(timeout=V.SERVER_WATCH_INTERVAL_SECONDS)
            except subprocess.TimeoutExpired:
                try:
                    database.live_url(url)
                except Exception as error:  # keep watching: the next tick tries again
                    log.warning("the embedded server did not restart: %s", type(error).__name__)
    except KeyboardInterrupt:  # Ctrl-C reached `dagster dev` too: let it shut its processes down
        return process.wait()
    finally:
        signal.signal(signal.SIGTERM, stopping)
