"""Partition definitions shared by the asset graph."""

from __future__ import annotations

from datetime import date, timedelta

import dagster as dg

from memory_assets import vocabulary as V

daily = dg.DailyPartitionsDefinition(start_date=V.PARTITION_START_DATE, end_offset=1, timezone="UTC")
# Weeks start on Monday (2024-01-01 was one); the running week is a partition too.
weekly = dg.WeeklyPartitionsDefinition(start_date=V.PARTITION_START_DATE, day_offset=1, end_offset=1, timezone="UTC")


def days_of(window: dg.TimeWindow) -> list[date]:
    """The UTC days a partition time window covers (one for a run, many for a single-run backfill)."""
    first, last = window.start.date(), window.end.date()
    return [first + timedelta(days=i) for i in range((last - first).days)]


PROJECTS = "projects"
projects = dg.DynamicPartitionsDefinition(name=PROJECTS)  # added by the project sensor
models = dg.StaticPartitionsDefinition(list(V.EMBEDDING_MODELS))
model_days = dg.MultiPartitionsDefinition({"model": models, "day": daily})


def week_of(day: date) -> date:
    """The Monday that starts the week holding a day: its weekly partition key."""
    return day - timedelta(days=day.weekday())


def model_day_key(model_key: str, day: date) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"model": model_key, "day": day.isoformat()})
