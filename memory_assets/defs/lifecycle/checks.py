"""Checks that history stays whole, forgetting is complete, decay covers the ledger and clusters link members."""

import dagster as dg

from memory_assets import quality
from memory_assets.defs.lifecycle.assets import consolidation_clusters, decay_scores
from memory_assets.defs.partitions import daily, days_of, weekly
from memory_assets.resources import PostgresResource


@dg.asset_check(asset=decay_scores, name="supersession_chains_sound", blocking=True, partitions_def=daily)
def supersession_chains_sound(postgres: PostgresResource) -> dg.AssetCheckResult:
    """Supersession chains are acyclic and every superseded unit has its valid_until."""
    with postgres.memory().connection() as conn:
        cycles, open_ended = quality.supersession_problems(conn)
    return dg.AssetCheckResult(passed=not cycles and not open_ended,
                               metadata={"units_in_cycles": cycles[:50],
                                         "superseded_without_valid_until": open_ended[:50]})


@dg.asset_check(asset=decay_scores, name="no_text_in_tombstones", blocking=True, partitions_def=daily)
def no_text_in_tombstones(postgres: PostgresResource) -> dg.AssetCheckResult:
    """A forgotten unit's text is nowhere: not in the ledger, the inbox, a bundle, a vector, nor in a summary or a
    merged near-duplicate derived from it; and its project is flagged, so remember() never stores it again."""
    with postgres.memory().connection() as conn:
        leaks = quality.tombstone_leaks(conn)
    places: dict[str, int] = {}
    for found in leaks.values():
        for place in found:
            places[place] = places.get(place, 0) + 1
    ids = sorted(leaks)
    return dg.AssetCheckResult(passed=not ids, metadata={"units": len(ids), "unit_ids": ids[:50],
                                                         "places": dict(sorted(places.items()))})


@dg.asset_check(asset=decay_scores, name="decay_covers_live_units", partitions_def=daily)
def decay_covers_live_units(context: dg.AssetCheckExecutionContext, postgres: PostgresResource) -> dg.AssetCheckResult:
    """Every unit live at the day's end (by its status then) has a score for the day."""
    day = days_of(context.partition_time_window)[-1]
    with postgres.memory().connection() as conn:
        missing = quality.units_without_decay(conn, day)
    return dg.AssetCheckResult(passed=not missing, metadata={"day": day.isoformat(), "missing": len(missing),
                                                             "unit_ids": missing[:50]})


@dg.asset_check(asset=consolidation_clusters, name="consolidated_units_link_members", blocking=True,
                partitions_def=weekly)
def consolidated_units_link_members(postgres: PostgresResource) -> dg.AssetCheckResult:
    """Each consolidated unit has a source for every member, and every member points back at it."""
    with postgres.memory().connection() as conn:
        broken = quality.unlinked_consolidations(conn)
    return dg.AssetCheckResult(passed=not broken, metadata={"clusters": len(broken), "unit_ids": broken[:50]})
