-- curation/nearest_older through the model's partial HNSW index, for a project of HNSW_MIN_PROJECT_UNITS units or
-- more (the exact scan there grows with the project: 17-42 ms per newcomer at 9k units, docs/scaling.md): the
-- project's %(overfetch)s nearest vectors in the graph's distance order (hnsw.iterative_scan = strict_order, set by
-- curation/hnsw_scan, walks past ef_search until enough are of the project), then the first whose unit is one of
-- the newcomer's peers (curation/_older_peers) by exact distance. Approximate like every HNSW read; when none is, the
-- caller scans exactly. The walk is materialised, so it runs once, and each vector it reaches is one read of its
-- unit (a LIMIT 1 per vector), whatever the statistics say of the day's units. Joined, a plan that guessed the
-- project's units few (statistics from before the day's writes) walked the graph again for every older peer, 50-600
-- ms a newcomer growing with its number (docs/scaling.md item 39). {dim} and {model} are composed per model so the
-- index expression and predicate match; the graph orders by its half-precision copies, the distance returned is the
-- stored vector's.
WITH n AS MATERIALIZED (
    SELECT e.unit_id, e.unit_revision, e.content_hash, e.embedding <=> %(vector)s::vector AS distance
    FROM memory_embeddings e
    WHERE e.model_key = {model} AND e.project = %(project)s::text
    ORDER BY (e.embedding::{hnsw_graph_type}({dim})) <=> %(vector)s::{hnsw_graph_type}({dim})
    LIMIT %(overfetch)s
)
SELECT o.id, o.number, o.revision, o.title, o.body, 1 - n.distance AS cosine
FROM n
CROSS JOIN LATERAL (
    SELECT o.id, o.number, o.revision, o.title, o.body FROM memory_units o
    WHERE o.id = n.unit_id AND o.revision = n.unit_revision AND o.content_hash = n.content_hash
      AND {curation/_older_peers}
    LIMIT 1) AS o
ORDER BY n.distance, o.number
LIMIT 1;
