"""The `memory-assets` command line: one click group over the Memory API, its commands split by family."""

from __future__ import annotations

import click

from memory_assets import tracing
from memory_assets.cli.common import MemoryGroup

# Each command by the module that holds its family; a module loads only when one of its commands runs.
COMMANDS = {
    "remember": "memory_assets.cli.write.remember",
    "import": "memory_assets.cli.write.import_",
    "show": "memory_assets.cli.read.show",
    "stats": "memory_assets.cli.read.stats",
    "recall": "memory_assets.cli.read.recall_",
    "forget": "memory_assets.cli.lifecycle.forget",
    "confirm": "memory_assets.cli.lifecycle.confirm",
    "flag": "memory_assets.cli.lifecycle.flag",
    "review": "memory_assets.cli.lifecycle.review",
    "materialize": "memory_assets.cli.operate.materialize",
    "embed": "memory_assets.cli.operate.embed",
    "dev": "memory_assets.cli.operate.dev",
    "demo": "memory_assets.cli.operate.demo",
    "mcp": "memory_assets.cli.serve.mcp",
    "lab": "memory_assets.cli.analyse.lab",
    "eval": "memory_assets.cli.evaluate.eval_",
    "bench": "memory_assets.cli.bench.bench",
}


@click.group(cls=MemoryGroup, lazy_commands=COMMANDS)
def main() -> None:
    """Long-term memory for AI agents on PostgreSQL + pgvector, run as a Dagster asset graph."""
    tracing.configure("cli")  # OTLP export when OTEL_EXPORTER_OTLP_ENDPOINT is set; no-op spans otherwise


__all__ = ["main"]
