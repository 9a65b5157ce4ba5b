"""The Dagster code location: every definition under memory_assets/defs, discovered (memory_assets/dg.toml)."""

from pathlib import Path

import dagster as dg

from memory_assets import tracing


@dg.definitions
def defs() -> dg.Definitions:
    """Everything the code server serves: assets, checks, jobs, schedules, sensors and resources."""
    tracing.configure("dagster")  # every Dagster process (code server, run worker) loads this first
    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
