-- The HNSW walk (sql/020) ordered by the half-precision copies the model's graph now holds (HNSW_GRAPH_TYPE,
-- embeddings.ensure_model_index): the order the index serves, so the walk stays the plan; the distance returned is
-- the stored vector's, exact, for the fusion to rank by. A store upgraded from a graph of full-precision vectors
-- answers exactly (the planner sorts) until its next embedding run has built the new index.
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
        'SELECT e.unit_id, e.unit_revision, e.content_hash, e.embedding <=> $2
         FROM memory_embeddings e
         WHERE e.model_key = %2$L AND e.project = $1
         ORDER BY (e.embedding::halfvec(%1$s)) <=> $2::halfvec(%1$s)
         LIMIT $3', walk_dim, walk_model)
        USING walk_project, walk_vector, walk_limit;
END $$;
