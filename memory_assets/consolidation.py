"""Weekly consolidation: clusters of a week's episodes become one semantic unit that links every member."""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from datetime import date, datetime, time, timedelta, timezone
from typing import Callable

import numpy as np
import psycopg

from memory_assets import gates, ledger
from memory_assets import vocabulary as V
from memory_assets.recall import STOPWORDS

log = logging.getLogger(__name__)

Summarizer = Callable[[list[str]], tuple[str, str]]  # optional LLM hook: member texts -> (title, body)

# only episodes every reader sees: a private one never surfaces in a shared summary
WEEK_UNITS = """
SELECT u.id, u.number, u.kind, u.title, u.body, u.keywords, e.embedding
FROM memory_units u
JOIN memory_embeddings e ON e.unit_id = u.id AND e.model_key = %(model)s
                        AND e.unit_revision = u.revision AND e.content_hash = u.content_hash
WHERE u.project = %(project)s AND u.type = 'episodic' AND u.status IN ('active', 'stale')
  AND u.private_to IS NULL
  AND u.created_at >= %(start)s AND u.created_at < %(end)s
ORDER BY u.number
"""


def clusters(vectors: np.ndarray) -> list[list[int]]:
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


def extract(rows: list[tuple], members: list[int], vectors: np.ndarray) -> tuple[str, str, list[str]]:
    """The most central member's statement plus the keywords most members share (the default, no LLM)."""
    block = vectors[members]
    central = members[int(np.argmax((block @ block.T).mean(axis=1)))]
    counts = Counter(w for m in members for w in gates.word_tokens(rows[m][3] + " " + rows[m][4])
                     if w not in STOPWORDS and len(w) > 2 and not w.isdigit())
    keywords = [w for w, n in counts.most_common(V.CONSOLIDATION_KEYWORDS) if n >= len(members) / 2]
    title, body = rows[central][3], rows[central][4]
    body = f"{body}\n(consolidated from {len(members)} episodes; shared: {', '.join(keywords) or 'none'})"
    return title, body[: V.BODY_MAX_CHARS], keywords


def consolidate_week(conn: psycopg.Connection, model_key: str, week_start: date,
                     summarizer: Summarizer | None = None) -> dict:
    """Replace the week's consolidated units: one semantic unit per cluster, sources linking every member."""
    start = datetime.combine(week_start, time.min, tzinfo=timezone.utc)
    end = start + timedelta(days=7)
    projects = [r[0] for r in conn.execute(
        "SELECT DISTINCT project FROM memory_units WHERE type = 'episodic' AND created_at >= %s AND created_at < %s",
        (start, end)).fetchall()]
    counts = {"projects": 0, "clusters": 0, "members": 0, "retired": 0}
    for project in projects:
        rows = conn.execute(WEEK_UNITS, {"model": model_key, "project": project, "start": start, "end": end}).fetchall()
        vectors = np.stack([r[6].to_numpy() for r in rows]) if rows else np.zeros((0, 1))
        found = clusters(vectors)
        with conn.transaction():
            previous = {r[0] for r in conn.execute(
                "SELECT consolidated_unit FROM consolidation_clusters WHERE week_start = %s AND project = %s",
                (week_start, project)).fetchall()}
            conn.execute("DELETE FROM consolidation_clusters WHERE week_start = %s AND project = %s", (week_start, project))
            kept = set()
            for number, members in enumerate(found):
                member_ids = [rows[m][0] for m in members]
                if summarizer:
                    title, body = summarizer([f"{rows[m][3]}\n{rows[m][4]}" for m in members])
                    keywords = []
                else:
                    title, body, keywords = extract(rows, members, vectors)
                key = hashlib.sha256("|".join(sorted(str(i) for i in member_ids)).encode()).hexdigest()[:16]
                candidate = gates.validate(
                    project=project, kind=rows[members[0]][2], type="semantic", title=title[: V.TITLE_MAX_CHARS],
                    body=body, keywords=keywords, feed="consolidation", task_id=f"consolidation:{week_start}:{key}",
                    confidence=V.ACTIVE_FROM_CONFIDENCE)
                result = ledger.remember(conn, candidate)
                if result.unit_id is None:
                    continue
                conn.execute(
                    "INSERT INTO memory_sources (unit_id, project, feed, task_id, source_ref) "
                    f"SELECT %s, %s, 'consolidation', m.id::text, {V.TOKEN_PREFIX_SQL} || m.number FROM memory_units m "
                    "WHERE m.id = ANY (%s) ON CONFLICT (unit_id, task_id) DO NOTHING",
                    (result.unit_id, project, member_ids))
                conn.execute("UPDATE memory_units SET consolidated_into = %s WHERE id = ANY (%s)",
                             (result.unit_id, member_ids))
                conn.execute("INSERT INTO consolidation_clusters (week_start, project, cluster, consolidated_unit, members) "
                             "VALUES (%s, %s, %s, %s, %s)", (week_start, project, number, result.unit_id, member_ids))
                kept.add(str(result.unit_id))
                counts["clusters"] += 1
                counts["members"] += len(members)
            stale = [u for u in previous if str(u) not in kept]
            if stale:
                counts["retired"] += conn.execute(
                    "UPDATE memory_units SET status = 'retired', updated_by = 'consolidation' "
                    "WHERE id = ANY (%s) AND status <> 'forgotten'", (stale,)).rowcount
        counts["projects"] += 1
    log.info("consolidated week=%s %s", week_start, counts)
    return counts
