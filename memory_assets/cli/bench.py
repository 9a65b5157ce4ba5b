"""The `bench` command: the benchmark harness of a source checkout (bench/harness.py), as `make bench` runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

HARNESS = Path(__file__).resolve().parents[2] / "bench" / "harness.py"


def harness_args(size: str, out: str | None, only: str, skip: str, part_timeout: float | None) -> list[str]:
    """The harness's command line for the chosen options, so the CLI and `make bench` run the same thing."""
    args = [sys.executable, str(HARNESS), "--size", size]
    if out:
        args += ["--out", out]
    if only:
        args += ["--only", only]
    if skip:
        args += ["--skip", skip]
    if part_timeout:
        args += ["--part-timeout", str(part_timeout)]
    return args


@click.command("bench")
@click.option("--size", type=click.Choice(["smoke", "default", "full"]), default="default", show_default=True,
              help="smoke: seconds per part (CI); default: the README's figures; full: 1M units, every conversation.")
@click.option("--out", type=click.Path(file_okay=False), help="Folder for the JSON files and summary.md "
              "(default bench/results).")
@click.option("--only", default="", help="Comma-separated parts: ingest,embed,recall,freshness,load,graph,peer.")
@click.option("--skip", default="", help="Comma-separated parts to leave out.")
@click.option("--part-timeout", type=float, default=None, help="Seconds before a part is stopped.")
def bench(size: str, out: str | None, only: str, skip: str, part_timeout: float | None) -> None:
    """Run the benchmarks (ingest, embedding, recall, the daily graph, the mem0 peer) and write the summary."""
    if not HARNESS.is_file():
        raise click.ClickException("`memory-assets bench` runs from a source checkout: bench/ does not ship in the "
                                   "wheel (clone the repository and run `make bench`).")
    code = subprocess.run(harness_args(size, out, only, skip, part_timeout), check=False).returncode
    if code:
        raise click.exceptions.Exit(code)
