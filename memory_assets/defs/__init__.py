"""The Dagster layer: declarations (assets, checks, partitions, jobs, schedules, sensors) that call the domain."""

import warnings

import dagster as dg

# The beta notices of what these definitions declare (partition mappings, backfill policies) are for whoever edits
# this folder; an operator running the CLI or the code server gets none.
warnings.filterwarnings("ignore", category=dg.BetaWarning)
