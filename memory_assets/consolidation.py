"""Weekly consolidation: clusters of a week's episodes become one semantic unit that links every member."""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import numpy as np
import psycopg

from memory_assets import gates
from memory_assets import vocabulary as V
from memory_assets.database import query
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


def extract(rows: list[tuple[Any, ...]], members: list[int],
            vectors: np.ndarray[Any, Any]) -> tuple[str, str, list[str]]:
    """The most central member's statement plus the keywords most members share (the default, no LLM)."""
    block = vectors[members]
    central = members[int(np.argmax((block @ block.T).mean(axis=1)))]
    counts = Counter(w for m in members for w in gates.word_tokens(rows[m][3] + " " + rows[m][4])
                     if w not in V.STOPWORDS and len(w) > 2 and not w.isdigit())
    keywords = [w for w, n in counts.most_common(V.CONSOLIDATION_KEYWORDS) if n >= len(members) / 2]
    title, body = rows[central][3], rows[central][4]
    body = f"{body}\n(consolidated from {len(members)} episodes; shared: {', '.join(keywords) or 'none'})"
    return title, body[: V.BODY_MAX_CHARS], keywords


def consolidate_week(conn: psycopg.Connection[Any], model_key: str, week_start: date,
                     summarizer: Summarizer | None = None) -> dict[str, int]:
    """Replace the week's consolidated units: one semantic unit per cluster, sources linking every member."""
    start = datetime.combine(week_start, time.min, tzinfo=UTC)
    end = start + timedelta(days=7)
    projects = [r[0] for r in conn.execute(query("consolidation/week_projects"), {"start": start, "end": end})]
    counts = {"projects": 0, "clusters": 0, "members": 0, "retired": 0}
    for project in projects:
        rows = conn.execute(query("consolidation/week_episodes"),
                            {"model": model_key, "project": project, "start": start, "end": end}).fetchall()
        vectors = np.stack([r[6].to_numpy() for r in rows]) if rows else np.zeros((0, 1))
        found = clusters(vectors)
        with conn.transaction():
            previous = {r[0] for r in conn.execute(
                "SELECT consolidated_unit FROM consolidation_clusters WHERE week_start = %s AND project = %s",
                (week_start, project)).fetchall()}
            conn.execute("DELETE FROM consolidation_clusters WHERE week_start = %s AND project = %s",
                         (week_start, project))
            kept: set[str] = set()
            for number, members in enumerate(found):
                member_ids = [rows[m][0] for m in members]
                if summarizer:
                    title, body = summarizer([f"{rows[m][3]}\n{rows[m][4]}" for m in members])
                    keywords: list[str] = []
                else:
                    title, body, keywords = extract(rows, members, vectors)
                key = hashlib.sha256("|".join(sorted(str(i) for i in member_ids)).encode()).hexdigest()[:16]
                candidate = gates.validate(
                    project=project, kind=rows[members[0]][2], type="semantic", title=title[: V.TITLE_MAX_CHARS],
                    body=body, keywords=keywords, feed="consolidation", task_id=f"consolidation:{week_start}:{key}",
                    confidence=V.ACTIVE_FROM_CONFIDENCE)
                result = capture.remember(conn, candidate)
                if result.unit_id is None:
                    continue
                conn.execute(query("consolidation/link_members"),
                             {"unit_id": result.unit_id, "project": project, "members": member_ids})
                conn.execute("UPDATE memory_units SET consolidated_into = %s WHERE id = ANY (%s)",
                             (result.unit_id, member_ids))
                conn.execute(query("consolidation/record_cluster"), {"week_start": week_start, "project": project,
                                                                     "cluster": number, "unit_id": result.unit_id,
                                                                     "members": member_ids})
                kept.add(str(result.unit_id))
                counts["clusters"] += 1
                counts["members"] += len(members)
            stale = [u for u in previous if str(u) not in kept]
            if stale:
                counts["retired"] += conn.execute(query("consolidation/retire_stale"), {"unit_ids": stale}).rowcount
        counts["projects"] += 1
    log.info("consolidated week=%s %s", week_start, counts)
    return counts
