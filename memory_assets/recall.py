"""Hybrid recall: dense (pgvector, serving model) and full-text legs, filtered before LIMIT, fused, cited."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable, NamedTuple

import numpy as np
import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from memory_assets import authz, embeddings, gates
from memory_assets import vocabulary as V

QueryEncoder = Callable[[str, str], "np.ndarray | None"]  # (model key, query) -> vector, None when unavailable

# Every filter of the recall path, applied inside each leg before its LIMIT (private_to: sql/007_visibility.sql).
UNIT_FILTERS = """
    u.project = %(project)s
    AND (u.private_to IS NULL OR %(reader)s = ANY (u.private_to))
    AND u.status IN ('active', 'superseded')
    AND u.valid_from <= %(at)s AND (u.valid_until IS NULL OR u.valid_until > %(at)s)
    AND (%(historical)s OR u.expired_at IS NULL)
    AND (%(kinds)s::text[] IS NULL OR u.kind = ANY (%(kinds)s::text[]))
    AND (%(types)s::text[] IS NULL OR u.type = ANY (%(types)s::text[]))
    AND (%(paths)s::text[] IS NULL OR EXISTS (
        SELECT 1 FROM unnest(u.paths) AS have, unnest(%(paths)s::text[]) AS want WHERE starts_with(have, want)))
"""

DENSE_EXACT = """
SELECT e.unit_id::text, e.embedding <=> %(vector)s AS distance, u.type = 'episodic' AS episodic
FROM memory_embeddings e
JOIN memory_units u ON u.id = e.unit_id AND u.revision = e.unit_revision AND u.content_hash = e.content_hash
WHERE e.model_key = %(model)s AND e.project = %(project)s AND {filters}
ORDER BY distance
LIMIT %(candidates)s
"""

# Large projects: an approximate first phase over the model's partial HNSW index (pgvector 0.8 iterative scan,
# filtering on the project column inside the scan), then the join that binds vectors to revisions and every
# other filter. When fewer rows than needed survive, the caller falls back to the exact query.
DENSE_HNSW = """
WITH near AS MATERIALIZED (
    SELECT e.unit_id, e.unit_revision, e.content_hash,
           (e.embedding::vector({dim})) <=> %(vector)s::vector({dim}) AS distance
    FROM memory_embeddings e
    WHERE e.model_key = {model} AND e.project = %(project)s
    ORDER BY (e.embedding::vector({dim})) <=> %(vector)s::vector({dim})
    LIMIT %(overfetch)s
)
SELECT n.unit_id::text, n.distance, u.type = 'episodic' AS episodic FROM near n
JOIN memory_units u ON u.id = n.unit_id AND u.revision = n.unit_revision AND u.content_hash = n.content_hash
WHERE {filters}
ORDER BY n.distance
LIMIT %(candidates)s
"""

# PostgreSQL's ts_rank ignores how rare a word is, so a query's common words (a speaker's name, "project")
# drown its rare ones. The sparse leg scores each match by the IDF of the query terms it contains (BM25's idf,
# no length normalisation) and breaks ties with ts_rank. Document frequencies are counted per project, over the
# units that contain any query term (read once, then each term tested on those rows only); N is the project's size.
SPARSE = """
WITH matched AS MATERIALIZED (
    SELECT u.id, u.tsv, u.number, u.type = 'episodic' AS episodic, ({filters}) AS recallable
    FROM memory_units u
    WHERE u.project = %(project)s AND u.tsv @@ to_tsquery('english', %(tsquery)s)
), terms AS MATERIALIZED (
    SELECT q.query, ln(1 + (%(units)s - count(m.id) + 0.5) / (count(m.id) + 0.5)) AS idf
    FROM unnest(%(terms)s::text[]) AS t(term)
    CROSS JOIN LATERAL to_tsquery('english', t.term) AS q(query)
    LEFT JOIN matched m ON m.tsv @@ q.query
    GROUP BY q.query
)
SELECT m.id::text AS unit_id, (SELECT sum(t.idf) FROM terms t WHERE m.tsv @@ t.query) AS score, m.episodic
FROM matched m, to_tsquery('english', %(tsquery)s) AS q
WHERE m.recallable
ORDER BY score DESC, ts_rank(m.tsv, q) DESC, m.number
LIMIT %(candidates)s
"""

# Conversation structure: episodic units of one session that sit next to each other (by number) are turns of
# one exchange; an answer often sits one turn away from the turn that matches the question.
NEIGHBOURS = """
SELECT c.id::text AS of_id, n.id::text AS unit_id, abs(n.number - c.number) AS distance
FROM memory_units c
CROSS JOIN LATERAL (  -- a range of the (project, number) index per seed; the LIMIT keeps the planner there
    SELECT u.id, u.number FROM memory_units u
    WHERE u.project = c.project AND u.number BETWEEN c.number - %(window)s AND c.number + %(window)s
      AND u.id <> c.id AND u.type = 'episodic' AND {filters}
    LIMIT 2 * %(window)s) AS n
WHERE c.id = ANY (%(ids)s::uuid[]) AND c.type = 'episodic'
  AND EXISTS (SELECT 1 FROM memory_sources a JOIN memory_sources b ON a.session_id = b.session_id
              WHERE a.unit_id = c.id AND b.unit_id = n.id)
"""

# What scoring needs, for every fused candidate, read from the sources its reader may see (a private source of
# another persona must not move a shared unit's rank); the hits' text, citations and validity for the top k only.
VISIBLE_SOURCE = f"(s.visibility = '{V.VISIBILITY_PROJECT}' OR s.persona = %(reader)s)"

DETAILS = f"""
SELECT u.id::text AS unit_id, u.number, u.importance, u.trust, u.valid_from, src.personas, src.session_id,
       d.recency
FROM memory_units u
LEFT JOIN (SELECT s.unit_id, array_agg(DISTINCT lower(s.persona)) AS personas,
                  (array_agg(s.session_id ORDER BY s.id))[1] AS session_id
           FROM memory_sources s WHERE s.unit_id = ANY (%(ids)s::uuid[]) AND {VISIBLE_SOURCE}
           GROUP BY s.unit_id) AS src ON src.unit_id = u.id
LEFT JOIN (SELECT DISTINCT ON (unit_id) unit_id, recency FROM decay_scores  -- as_of recomputes recency instead
           WHERE NOT %(historical)s AND unit_id = ANY (%(ids)s::uuid[]) ORDER BY unit_id, day DESC) AS d
       ON d.unit_id = u.id
WHERE u.id = ANY (%(ids)s::uuid[])
"""

CITED_TEXT = f"""
SELECT u.id::text AS unit_id, {V.TOKEN_PREFIX_SQL} || u.number AS token, u.title, u.body, u.kind, u.type,
       u.valid_from, u.valid_until, u.status,
       (SELECT json_agg(json_build_object('feed', s.feed, 'task_id', s.task_id, 'session_id', s.session_id,
                                          'persona', s.persona, 'commit', s.observed_sha, 'source_ref', s.source_ref)
                        ORDER BY s.id)
        FROM memory_sources s WHERE s.unit_id = u.id AND {VISIBLE_SOURCE}) AS citations
FROM memory_units u WHERE u.id = ANY (%(ids)s::uuid[])
"""


@dataclass
class Hit:
    """One recalled unit with its score, the score's components and the sources that back it."""

    token: str
    title: str
    body: str
    kind: str
    type: str
    score: float
    components: dict
    citations: list[dict]
    valid_from: datetime
    valid_until: datetime | None
    status: str
    unit_id: str
    mode: str

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class RecallResult:
    """The hits, best first, and which legs served them (hybrid | sparse_only | dense_only)."""

    hits: list[Hit]
    mode: str
    notes: list[str] = field(default_factory=list)

    def __iter__(self):
        return iter(self.hits)

    def __len__(self):
        return len(self.hits)

    def __getitem__(self, index):
        return self.hits[index]


STOPWORDS = frozenset("""a an the and or but of to in on at for with by from as is are was were be been being do does did
what when where which who whom whose why how that this these those it its i you he she we they me him her us them my your
his our their have has had not no yes can could would should will shall may might must about into over after before
than then there here if so just also any all some""".split())


def tsquery_terms(query: str) -> list[str]:
    """The query's searchable words, de-duplicated, at most RECALL_MAX_QUERY_TERMS."""
    words = [w.lower() for w in re.findall(r"[A-Za-z0-9]+", query)]
    terms = [w for w in dict.fromkeys(words) if w not in STOPWORDS and len(w) > 1]
    return terms[: V.RECALL_MAX_QUERY_TERMS]


def validate_query(project: str, query: str, k: int, kinds, types, paths) -> None:
    gates.project_name(project)
    if not isinstance(query, str) or not query.strip():
        raise gates.ValidationError("query", "must not be empty")
    if len(query) > V.RECALL_MAX_QUERY_CHARS:
        raise gates.ValidationError("query", f"at most {V.RECALL_MAX_QUERY_CHARS} characters (got {len(query)})")
    if not isinstance(k, int) or not 1 <= k <= V.RECALL_MAX_K:
        raise gates.ValidationError("k", f"must be between 1 and {V.RECALL_MAX_K} (got {k!r})")
    for name, values, allowed in (("kinds", kinds, V.KINDS), ("types", types, V.TYPES)):
        for value in values or []:
            if value not in allowed:
                raise gates.ValidationError(name, f"must be among {', '.join(allowed)} (got {value!r})")
    if paths is not None and (isinstance(paths, str) or not all(isinstance(p, str) for p in paths)):
        raise gates.ValidationError("paths", "must be a list of strings")


def hnsw_candidates(k: int) -> int:
    """How many dense candidates the HNSW phase returns: few enough for one pass of ef_search, never fewer than k."""
    return max(V.HNSW_CANDIDATES, k)


def dense_leg(conn: psycopg.Connection, params: dict, model_key: str, project_units: int) -> list[tuple]:
    """Cosine search over the serving model's current vectors, every filter applied before the final LIMIT.

    Exact for projects under HNSW_MIN_PROJECT_UNITS; above, the HNSW first phase for HNSW_CANDIDATES (or k) rows,
    falling back to exact when its over-fetch leaves fewer than that (bench/recall.py measures both paths).
    """
    exact = sql.SQL(DENSE_EXACT).format(filters=sql.SQL(UNIT_FILTERS))
    if project_units < V.HNSW_MIN_PROJECT_UNITS:
        return conn.execute(exact, params).fetchall()
    wanted = {**params, "candidates": hnsw_candidates(params["k"])}
    overfetch = wanted["candidates"] * V.HNSW_OVERFETCH
    spec = embeddings.model_spec(model_key)
    approximate = sql.SQL(DENSE_HNSW).format(dim=sql.SQL(str(int(spec.dim))), model=sql.Literal(model_key),
                                             filters=sql.SQL(UNIT_FILTERS))
    rows = conn.execute(approximate, {**wanted, "overfetch": overfetch}).fetchall()
    return rows if len(rows) >= wanted["candidates"] else conn.execute(exact, wanted).fetchall()


# The serving model, the project's size (which picks the dense path) and the HNSW scan knobs, set locally:
# ef_search = sqrt(units) between HNSW_EF_SEARCH (at least the over-fetch) and HNSW_EF_SEARCH_MAX.
REQUEST_CONTEXT = f"""
SELECT {embeddings.SERVING_MODEL_SQL}, p.units, ef.value,
       set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', ef.value::text, true)
FROM (SELECT coalesce((SELECT last_number FROM memory_projects WHERE project = %(project)s), 0) AS units) AS p,
     LATERAL (SELECT greatest(%(ef_floor)s, least(%(ef_max)s, round(sqrt(p.units))::int)) AS value) AS ef
"""


class RequestContext(NamedTuple):
    """What a request reads first: the serving model, how many units the project has numbered, the ef_search set."""

    model_key: str
    units: int
    ef_search: int


def request_context(conn: psycopg.Connection, project: str, k: int) -> RequestContext:
    """The serving model and the project's size in the request's first read, with the HNSW knobs set for its size."""
    ef_floor = max(V.HNSW_EF_SEARCH, hnsw_candidates(k) * V.HNSW_OVERFETCH)
    row = conn.execute(REQUEST_CONTEXT, {**embeddings.SERVING_MODEL_PARAMS, "project": project, "ef_floor": ef_floor,
                                         "ef_max": max(ef_floor, V.HNSW_EF_SEARCH_MAX)}).fetchone()
    return RequestContext(*row[:3])


def request_params(project: str, terms: list[str], k: int, at: datetime, historical: bool, kinds=None, types=None,
                   paths=None, reader: str | None = None) -> dict:
    """The parameters every leg's SQL shares: the filters, k, the candidate count and the OR-ed query terms."""
    return {"project": project, "reader": reader, "at": at, "historical": historical,
            "kinds": list(kinds) if kinds else None, "types": list(types) if types else None,
            "paths": list(paths) if paths else None,
            "k": k, "candidates": max(V.RECALL_CANDIDATES, k), "tsquery": " | ".join(terms)}


def sparse_leg(conn: psycopg.Connection, params: dict, terms: list[str], units: int) -> list[tuple]:
    """Full-text candidates scored by the summed IDF of the query terms each one contains.

    `units` is the project's numbered-unit count (memory_projects.last_number): the N of the IDF, read for free.
    """
    statement = sql.SQL(SPARSE).format(filters=sql.SQL(UNIT_FILTERS))
    return conn.execute(statement, {**params, "terms": terms, "units": float(max(units, 1))}).fetchall()


def fuse(dense: list[tuple], sparse: list[tuple], weights: tuple[float, float]) -> dict[str, dict]:
    """Each leg's scores min-max normalised and weighted, mixed with weighted RRF; a unit first in both scores 1."""
    wd, ws = (weights[0] if dense else 0.0), (weights[1] if sparse else 0.0)
    if not wd + ws:
        return {}
    fused: dict[str, dict] = {}
    for leg, rows, weight, similarity in (("dense", dense, wd, lambda d: 1.0 - float(d)),
                                          ("sparse", sparse, ws, float)):
        scores = [similarity(value) for _, value, _ in rows]
        low, high = min(scores, default=0.0), max(scores, default=0.0)
        for rank, ((unit_id, *_), score) in enumerate(zip(rows, scores), start=1):
            entry = fused.setdefault(unit_id, {"dense": None, "sparse": None, "rrf": 0.0, "scores": 0.0})
            entry[leg] = score
            entry["rrf"] += weight / (V.RRF_K + rank)
            entry["scores"] += weight * ((score - low) / (high - low) if high > low else 1.0)
    best_rrf = (wd + ws) / (V.RRF_K + 1)
    for entry in fused.values():
        entry["rrf"] /= best_rrf
        entry["scores"] /= wd + ws
        entry["relevance"] = V.RRF_SHARE * entry["rrf"] + (1 - V.RRF_SHARE) * entry["scores"]
    return fused


def max_relevance(persona: bool, time: bool) -> float:
    """The highest relevance the structure and the cues in play can give: dividing by it brings relevance to 0..1."""
    return ((1 + V.CONTEXT_WEIGHT + V.SESSION_WEIGHT) * (1 + V.PERSONA_BOOST * persona)
            * (1 + V.TIME_CUE_BOOST * time))


def spread_to_neighbours(conn: psycopg.Connection, fused: dict[str, dict], episodic: set[str], params: dict) -> None:
    """Give each episodic unit a share of its best-scoring neighbours' relevance (turns next to a match)."""
    seeds = [u for u in sorted(fused, key=lambda u: -fused[u]["relevance"])[: V.CONTEXT_SEEDS] if u in episodic]
    if not seeds:
        return
    rows = conn.execute(sql.SQL(NEIGHBOURS).format(filters=sql.SQL(UNIT_FILTERS)),
                        {**params, "ids": seeds, "window": V.CONTEXT_WINDOW}).fetchall()
    bonus: dict[str, float] = {}
    for of_id, unit_id, distance in rows:
        share = V.CONTEXT_WEIGHT * fused[of_id]["relevance"] / distance
        bonus[unit_id] = max(bonus.get(unit_id, 0.0), share)
    for unit_id, extra in bonus.items():
        entry = fused.setdefault(unit_id, {"dense": None, "sparse": None, "rrf": 0.0, "scores": 0.0, "relevance": 0.0})
        entry["context"] = extra
        entry["relevance"] += extra


MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
MONTH = "(?P<month>" + "|".join(MONTHS) + ")"
NAMED_DAY = re.compile(  # '7 July, 2023' or 'July 7, 2023'
    rf"\b(?:(?P<d1>\d{{1,2}})\s+{MONTH}|(?P<m2>{'|'.join(MONTHS)})\s+(?P<d2>\d{{1,2}})),?\s+(?P<year>\d{{4}})\b",
    re.IGNORECASE)
NAMED_MONTH = re.compile(rf"\b{MONTH},?\s+(?P<year>\d{{4}})\b", re.IGNORECASE)


def time_windows(query: str) -> list[tuple[datetime, datetime]]:
    """The days and months a query names ('on 7 July, 2023', 'May 3, 2023', 'in December 2023') as time windows."""
    windows = []
    for match in NAMED_DAY.finditer(query):
        month = MONTHS.index((match["month"] or match["m2"]).lower()) + 1
        try:
            day = datetime(int(match["year"]), month, int(match["d1"] or match["d2"]), tzinfo=timezone.utc)
        except ValueError:  # 31 February: not a date, not a cue
            continue
        slack = timedelta(days=V.TIME_CUE_DAY_SLACK_DAYS)
        windows.append((day - slack, day + timedelta(days=1) + slack))
    for match in NAMED_MONTH.finditer(NAMED_DAY.sub(" ", query)):
        month, year = MONTHS.index(match["month"].lower()) + 1, int(match["year"])
        windows.append((datetime(year, month, 1, tzinfo=timezone.utc),
                        datetime(year + month // 12, month % 12 + 1, 1, tzinfo=timezone.utc)))
    return windows


def lift_sessions(fused: dict[str, dict], details: dict[str, dict]) -> None:
    """Give every unit a share of its session's best relevance: the evidence for a question clusters in sessions."""
    best: dict[str, float] = {}
    for unit_id, entry in fused.items():
        session = details[unit_id]["session_id"]
        if session:
            best[session] = max(best.get(session, 0.0), entry["relevance"])
    top = max(best.values(), default=0.0)
    for unit_id, entry in fused.items():
        session = details[unit_id]["session_id"]
        if session and top:
            entry["session"] = V.SESSION_WEIGHT * best[session] / top
            entry["relevance"] += entry["session"]


def score(fused: dict[str, dict], details: dict[str, dict], query: str, at: datetime) -> None:
    """Final score: relevance (with the persona and time cues) * (0.7 + 0.2 importance + 0.1 recency)."""
    named = {w.lower() for w in re.findall(r"[A-Za-z0-9]+", query)}
    windows = time_windows(query)
    for unit_id, entry in fused.items():
        unit = details[unit_id]
        if named & set(unit["personas"] or ()):
            entry["persona"] = V.PERSONA_BOOST
            entry["relevance"] *= 1 + V.PERSONA_BOOST
        if any(start <= unit["valid_from"] < end for start, end in windows):
            entry["time"] = V.TIME_CUE_BOOST
            entry["relevance"] *= 1 + V.TIME_CUE_BOOST
    ceiling = max_relevance(any("persona" in e for e in fused.values()), any("time" in e for e in fused.values()))
    for unit_id, entry in fused.items():
        unit = details[unit_id]
        entry["relevance"] /= ceiling
        entry["importance"] = float(unit["importance"])
        entry["trust"] = float(unit["trust"])
        entry["recency"] = recency(unit["valid_from"], at) if unit["recency"] is None else unit["recency"]
        entry["score"] = entry["relevance"] * (0.7 + 0.2 * entry["importance"] + 0.1 * entry["recency"])


def recency(valid_from: datetime, at: datetime) -> float:
    age_days = max(0.0, (at - valid_from).total_seconds() / 86400)
    return math.exp(-math.log(2) * age_days / V.RECENCY_HALF_LIFE_DAYS)


def recall(conn: psycopg.Connection, project: str, query: str, k: int = V.RECALL_DEFAULT_K, *,
           as_of: datetime | None = None, kinds=None, types=None, paths=None,
           actor: authz.Actor | None = None, encoder: QueryEncoder | None = None, legs: str = "hybrid",
           weights: tuple[float, float] | None = None) -> RecallResult:
    """Recall the units of a project that best answer a query, valid at `as_of` (default now), with citations."""
    validate_query(project, query, k, kinds, types, paths)
    weights = weights or (V.DENSE_WEIGHT, V.SPARSE_WEIGHT)
    if as_of is not None and as_of.tzinfo is None:
        raise gates.ValidationError("as_of", "must be timezone-aware")
    actor = actor or authz.Actor.reader(project)
    at = as_of or datetime.now(timezone.utc)
    terms = tsquery_terms(query)
    params = request_params(project, terms, k, at, as_of is not None, kinds, types, paths, reader=actor.name)
    notes: list[str] = []
    with authz.scoped(conn, actor):
        model_key, size, _ = request_context(conn, project, k)
        vector = None
        if legs in ("hybrid", "dense") and encoder is not None:
            vector = encoder(model_key, query)
        if vector is None and legs != "sparse":
            notes.append("no query vector: the embedding model is unavailable")
        dense = []
        if vector is not None:
            params.update(vector=vector, model=model_key)
            dense = dense_leg(conn, params, model_key, size)
            if not dense:
                notes.append(f"no vectors of the serving model {model_key} match")
        sparse = sparse_leg(conn, params, terms, size) if terms and legs in ("hybrid", "sparse") else []
        mode = "hybrid" if dense and terms else ("dense_only" if dense else "sparse_only")
        fused = fuse(dense, sparse, weights)
        if fused and V.CONTEXT_WEIGHT > 0:
            spread_to_neighbours(conn, fused, {row[0] for row in dense + sparse if row[2]}, params)
        if not fused:
            return RecallResult(hits=[], mode=mode, notes=notes)
        with conn.cursor(row_factory=dict_row) as cur:
            details = {r["unit_id"]: r for r in cur.execute(
                DETAILS, {"ids": list(fused), "historical": as_of is not None, "reader": actor.name}).fetchall()}
            lift_sessions(fused, details)
            score(fused, details, query, at)
            top = sorted(fused, key=lambda u: (-fused[u]["score"], details[u]["number"]))[:k]
            cited = {r["unit_id"]: r
                     for r in cur.execute(CITED_TEXT, {"ids": top, "reader": actor.name}).fetchall()}
    hits = [Hit(token=cited[u]["token"], title=cited[u]["title"], body=cited[u]["body"], kind=cited[u]["kind"],
                type=cited[u]["type"], score=round(fused[u]["score"], 6),
                components={key: (round(value, 6) if isinstance(value, float) else value)
                            for key, value in fused[u].items() if key != "score"},
                citations=cited[u]["citations"] or [], valid_from=cited[u]["valid_from"],
                valid_until=cited[u]["valid_until"], status=cited[u]["status"], unit_id=u, mode=mode) for u in top]
    return RecallResult(hits=hits, mode=mode, notes=notes)
