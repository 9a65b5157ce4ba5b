-- curation/nearest_older through the model's partial HNSW index, for a project of HNSW_MIN_PROJECT_UNITS units or
-- more (the exact scan there grows with the project: 17-42 ms per newcomer at 9k units, docs/scaling.md): the
-- project's %(overfetch)s nearest vectors in the graph's distance order (hnsw.iterative_scan = strict_order, set by
-- curation/hnsw_scan, walks past ef_search until enough are of the project), then the first whose unit is one of
-- the newcomer's peers (curation/_older_peers) by exact distance. Approximate like every HNSW read; when none is, the
-- caller scans exactly. The LIMIT inside keeps the planner on the index (with the unit filters beside the ORDER BY it
-- sorted a hash join of the whole project). {dim} and {model} are composed per model so the index expression and
-- predicate match; the graph orders by its half-precision copies, the distance returned is the stored vector's.
SELECT o.id, o.number, o.title, o.body, 1 - n.distance AS cosine
FROM (SELECT e.unit_id, e.unit_revision, e.content_hash, e.embedding <=> %(vector)s::vector AS distance
      FROM memory_embeddings e
      WHERE e.model_key = {model} AND e.project = %(project)s::text
      ORDER BY (e.embedding::{hnsw_graph_type}({dim})) <=> %(vector)s::{hnsw_graph_type}({dim})
      LIMIT %(overfetch)s) AS n
JOIN memory_units o ON o.id = n.unit_id AND o.revision = n.unit_revision AND o.content_hash = n.content_hash
WHERE {curation/_older_peers}
ORDER BY n.distance, o.number
LIMIT 1;
