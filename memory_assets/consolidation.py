"""Weekly consolidation: clusters of a week's episodes become one semantic unit that links every member."""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, NamedTuple

import numpy as np
import psycopg

from memory_assets import gates, lifecycle
from memory_assets import vocabulary as V
from memory_assets.database import one, query
from memory_assets.errors import ValidationError
from memory_assets.ledger import capture

log = logging.getLogger(__name__)

Summarizer = Callable[[list[str]], tuple[str, str]]  # optional LLM hook: member texts -> (title, body)


def clusters(vectors: np.ndarray[Any, Any]) -> list[list[int]]:
    """Agglomerative clusters (cosine, average linkage, distance threshold) of at least the minimum size."""
    from sklearn.cluster import AgglomerativeClustering

    if len(vectors) < V.CONSOLIDATION_MIN_CLUSTER:
        return []
    labels = AgglomerativeClustering(n_clusters=None, metric="cosine", linkage="average",
                                     distance_threshold=V.CONSOLIDATION_DISTANCE).fit_predict(vectors)
    groups: dict[int, list[int]] = {}
    for index, label in enumerate(labels):
        groups.setdefault(int(label), []).append(index)
    return sorted((g for g in groups.values() if len(g) >= V.CONSOLIDATION_MIN_CLUSTER), key=lambda g: g[0])


def central_member(rows: list[tuple[Any, ...]], members: list[int], vectors: np.ndarray[Any, Any]) -> int:
    """The member most similar on average to the others; a tie (within float noise) goes to the lowest unit number,
    so the choice never depends on the order the members come in."""
    ordered = sorted(members, key=lambda m: rows[m][1])
    block = vectors[ordered]
    means = (block @ block.T).mean(axis=1)
    best = float(means.max())
    return next(m for m, mean in zip(ordered, means, strict=True) if mean >= best - V.CONSOLIDATION_CENTRAL_TIE)


def shared_keywords(rows: list[tuple[Any, ...]], members: list[int]) -> list[str]:
    """The words most members share, by count then alphabetically: the same list under any hash seed; never one
    longer than a keyword may be (a unit's 256-letter word would make its cluster's summary invalid)."""
    counts = Counter(w for m in members for w in gates.word_tokens(rows[m][3] + " " + rows[m][4])
                     if w not in V.STOPWORDS and 2 < len(w) <= V.ITEM_MAX_CHARS and not w.isdigit())
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [w for w, n in ranked[: V.CONSOLIDATION_KEYWORDS] if n >= len(members) / 2]


def extract(rows: list[tuple[Any, ...]], members: list[int],
            vectors: np.ndarray[Any, Any]) -> tuple[str, str, list[str]]:
    """The most central member's statement plus the keywords most members share (the default, no LLM)."""
    central = central_member(rows, members, vectors)
    keywords = shared_keywords(rows, members)
    title, body = rows[central][3], rows[central][4]
    body = f"{body}\n(consolidated from {len(members)} episodes; shared: {', '.join(keywords) or 'none'})"
    return title, body[: V.BODY_MAX_CHARS], keywords


class Draft(NamedTuple):
    """One cluster's summary, written before the week's transaction opens (a summariser may take seconds)."""

    members: list[Any]  # unit ids, by unit number
    kind: str
    title: str
    body: str
    keywords: list[str]


def draft(rows: list[tuple[Any, ...]], members: list[int], vectors: np.ndarray[Any, Any],
          summarizer: Summarizer | None) -> Draft:
    """A cluster's summary text from its members in unit-number order, by the summariser or by extraction."""
    members = sorted(members, key=lambda m: rows[m][1])
    if summarizer:
        title, body = summarizer([f"{rows[m][3]}\n{rows[m][4]}" for m in members])
        body = body[: V.BODY_MAX_CHARS]
        keywords: list[str] = []
    else:
        title, body, keywords = extract(rows, members, vectors)
    return Draft([rows[m][0] for m in members], rows[members[0]][2], title, body, keywords)


def consolidate_week(conn: psycopg.Connection[Any], model_key: str, week_start: date,
                     summarizer: Summarizer | None = None) -> dict[str, int]:
    """Replace the week's consolidated units: one semantic unit per cluster, sources linking every member.

    A re-run re-creates the same summaries (same text, same units): one it retired as stale comes back rather than
    leave its cluster without a live summary. Members forgotten since they were read never reach a summary.
    """
    start = datetime.combine(week_start, time.min, tzinfo=UTC)
    end = start + timedelta(days=7)
    projects = [r[0] for r in conn.execute(query("consolidation/week_projects"), {"start": start, "end": end})]
    counts = {"projects": 0, "clusters": 0, "members": 0, "retired": 0, "skipped": 0}
    for project in projects:
        rows = conn.execute(query("consolidation/week_episodes"),
                            {"model": model_key, "project": project, "start": start, "end": end}).fetchall()
        vectors = np.stack([r[6].to_numpy() for r in rows]) if rows else np.zeros((0, 1))
        drafts = [draft(rows, members, vectors, summarizer) for members in clusters(vectors)]
        with conn.transaction():
            lifecycle.hold_derivations(conn, project)  # a forget of this project waits, or has committed
            forgotten = {str(r[0]) for r in conn.execute(query("consolidation/forgotten_members"),
                                                         {"ids": [r[0] for r in rows]}).fetchall()}
            previous = [r[0] for r in conn.execute(query("consolidation/drop_week"),
                                                   {"week_start": week_start, "project": project}).fetchall()]
            for number, cluster in enumerate(drafts):
                if forgotten & {str(i) for i in cluster.members}:
                    counts["skipped"] += 1  # the next run rebuilds it from the members that remain
                    continue
                unit_id = summarise(conn, project, week_start, number, cluster)
                if unit_id is None:
                    counts["skipped"] += 1
                    continue
                counts["clusters"] += 1
                counts["members"] += len(cluster.members)
            if previous:
                counts["retired"] += conn.execute(query("consolidation/retire_stale"), {
                    "unit_ids": previous, "feed": V.FEED_CONSOLIDATION}).rowcount
        counts["projects"] += 1
    log.info("consolidated week=%s %s", week_start, counts)
    return counts


def summarise(conn: psycopg.Connection[Any], project: str, week_start: date, number: int,
              cluster: Draft) -> Any:
    """Remember one cluster's summary and link it to its members; its unit id, or None (forgotten content, or a
    summary that is no valid unit: that cluster is skipped, never the week of every project)."""
    key = hashlib.sha256("|".join(sorted(str(i) for i in cluster.members)).encode()).hexdigest()[:16]
    try:
        candidate = gates.validate(
            project=project, kind=cluster.kind, type="semantic", title=cluster.title[: V.TITLE_MAX_CHARS],
            body=cluster.body, keywords=cluster.keywords, feed=V.FEED_CONSOLIDATION,
            task_id=f"{V.FEED_CONSOLIDATION}:{week_start}:{key}", confidence=V.ACTIVE_FROM_CONFIDENCE)
    except ValidationError as refused:
        log.warning("consolidation skipped a cluster of project %s: its summary's %s is invalid", project,
                    refused.field)
        return None
    result = capture.remember(conn, candidate)
    if result.unit_id is None:
        return None
    unit_id = one(conn.execute(query("consolidation/live_summary"),
                               {"unit_id": result.unit_id, "feed": V.FEED_CONSOLIDATION}))[0]
    conn.execute(query("consolidation/link_members"), {"unit_id": unit_id, "project": project,
                                                       "feed": V.FEED_CONSOLIDATION, "members": cluster.members})
    conn.execute("UPDATE memory_units SET consolidated_into = %s WHERE id = ANY (%s)", (unit_id, cluster.members))
    conn.execute(query("consolidation/record_cluster"), {"week_start": week_start, "project": project,
                                                         "cluster": number, "unit_id": unit_id,
                                                         "members": cluster.members})
    return unit_id
