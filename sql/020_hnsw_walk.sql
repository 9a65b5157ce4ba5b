-- The HNSW path's index walk as a function that plans it with sorting off, so the walk is the only plan left. Inline
-- in recall/candidates, a store of many projects made the planner sort the project's every vector instead (an exact
-- scan: 23 against 9.6 ms p50 for a 10,000-unit project beside 300 small ones, docs/scaling.md): row-level security
-- adds `project = ANY (scopes)`, which the planner estimates as independent of `project = $1`, so it guessed ~300 of
-- the project's 10,000 vectors and a sort of those looked cheaper than the walk. Planned per call (dynamic SQL: the
-- model key must be a literal for its partial index to match), as the caller, under the caller's row-level security
-- and the request's hnsw.* settings; the dimension is an integer and the key a quoted literal.
-- Parallel restricted: it runs in the request's own process, never in a worker.

-- Whether a project walks the graph: not when it holds under min_share of the store's vectors (pg_class's estimate,
-- every model's; unknown before the first ANALYZE: walk). Such a walk passes mostly over other projects' vectors: a
-- 1,000-unit project beside 100,000 took 203 ms for 0.79 of its exact top 10 with sorting off, where the planner,
-- left to sort the project's own vectors, answers exactly in a few ms.
CREATE OR REPLACE FUNCTION memory_hnsw_walks(project_units bigint, min_share float8) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT NOT (project_units < min_share * c.reltuples)
    FROM pg_class c WHERE c.oid = 'memory_embeddings'::regclass
$$;

CREATE OR REPLACE FUNCTION memory_hnsw_walk(walk_project text, walk_model text, walk_dim integer, walk_vector vector,
                                            walk_limit integer, walk_units bigint, walk_min_share float8)
RETURNS TABLE (unit_id uuid, unit_revision integer, content_hash text, distance float8)
LANGUAGE plpgsql STABLE PARALLEL RESTRICTED
SET enable_sort = off
AS $$
BEGIN
    IF NOT memory_hnsw_walks(walk_units, walk_min_share) THEN
        PERFORM set_config('enable_sort', 'on', true);  -- for this call only: the SET clause restores it on return
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT e.unit_id, e.unit_revision, e.content_hash, (e.embedding::vector(%1$s)) <=> $2::vector(%1$s)
         FROM memory_embeddings e
         WHERE e.model_key = %2$L AND e.project = $1
         ORDER BY (e.embedding::vector(%1$s)) <=> $2::vector(%1$s)
         LIMIT $3', walk_dim, walk_model)
        USING walk_project, walk_vector, walk_limit;
END $$;
