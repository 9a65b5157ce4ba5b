-- curation/nearest_older through the model's partial HNSW index, for a project of HNSW_MIN_PROJECT_UNITS units or
-- more (the exact scan there grows with the project: 17-42 ms per newcomer at 9k units, docs/scaling.md): the
-- project's %(overfetch)s nearest vectors in the graph's distance order, walked by memory_hnsw_walk (sql/020, sql/029)
-- as recall's dense leg walks them, whatever the planner guesses of the project (a plain ORDER BY ... LIMIT here
-- sorted the project's every vector on statistics that did not know them yet, a day's new vectors: no faster than
-- the exact scan; hnsw.iterative_scan = strict_order, set by curation/hnsw_scan, walks past ef_search until enough
-- are of the project), then the first whose unit is one of the newcomer's peers (curation/_older_peers) by exact
-- distance. Approximate like every HNSW read; when none is, the caller scans exactly. {dim} and {model} are composed
-- per model; the graph orders by its half-precision copies, the distance returned is the stored vector's.
SELECT o.id, o.number, o.title, o.body, 1 - n.distance AS cosine
FROM memory_hnsw_walk(%(project)s::text, {model}, {dim}, %(vector)s::vector, %(overfetch)s,
                      coalesce((SELECT last_number FROM memory_projects WHERE project = %(project)s::text), 0),
                      %(walk_min_share)s) AS n
JOIN memory_units o ON o.id = n.unit_id AND o.revision = n.unit_revision AND o.content_hash = n.content_hash
WHERE {curation/_older_peers}
ORDER BY n.distance, o.number
LIMIT 1;
