-- The HNSW walk (sql/020) ordered by the half-precision copies the model's graph now holds (HNSW_GRAPH_TYPE,
-- embeddings.ensure_model_index): the order the index serves, so the walk stays the plan; the distance returned is
-- the stored vector's, exact, for the fusion to rank by. Until a model's half-precision graph is built (at its next
-- embedding run: minutes for a large store), the walk keeps reading the graph of full-precision vectors its store
-- already has instead of sorting a large project's every vector: this migration marks each model whose HNSW index is
-- of `vector`s in memory_settings under 'hnsw_earlier_graph:<model key>' (V.SETTING_HNSW_EARLIER_GRAPH); the walk
-- orders by that index's expression while the mark stands, and embeddings.ensure_model_index removes it in the
-- transaction that builds (or finds) the model's current index. Re-running this file marks nothing a build has
-- cleared unless such an index still stands.
--
-- The half-precision type came with pgvector 0.7: a store whose extension was never updated fails here, by name, not
-- at its first large project's walk.
DO $$
BEGIN
    IF to_regtype('halfvec') IS NULL THEN
        RAISE EXCEPTION 'memory-assets needs pgvector 0.7 or later (the halfvec type): run ALTER EXTENSION vector UPDATE';
    END IF;
END $$;

INSERT INTO memory_settings (key, value)
SELECT DISTINCT 'hnsw_earlier_graph:' || substring(pg_get_expr(i.indpred, i.indrelid) FROM $re$model_key = '([^']+)'$re$),
       'vector'
FROM pg_catalog.pg_index i
JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
JOIN pg_catalog.pg_opclass o ON o.oid = i.indclass[0]
WHERE i.indrelid = 'public.memory_embeddings'::regclass
  AND starts_with(c.relname, 'memory_embeddings_hnsw_') AND o.opcname = 'vector_cosine_ops'
  AND pg_get_expr(i.indpred, i.indrelid) ~ $re$model_key = '[^']+'$re$
ON CONFLICT (key) DO NOTHING;

CREATE OR REPLACE FUNCTION memory_hnsw_walk(walk_project text, walk_model text, walk_dim integer, walk_vector vector,
                                            walk_limit integer, walk_units bigint, walk_min_share float8)
RETURNS TABLE (unit_id uuid, unit_revision integer, content_hash text, distance float8)
LANGUAGE plpgsql STABLE PARALLEL RESTRICTED
SET enable_sort = off
AS $$
DECLARE
    -- one of two type names, never the setting's text: it is spelled into the statement
    graph text := CASE WHEN (SELECT s.value FROM memory_settings s WHERE s.key = 'hnsw_earlier_graph:' || walk_model)
                            = 'vector' THEN 'vector' ELSE 'halfvec' END;
BEGIN
    IF NOT memory_hnsw_walks(walk_units, walk_min_share) THEN
        PERFORM set_config('enable_sort', 'on', true);  -- for this call only: the SET clause restores it on return
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT e.unit_id, e.unit_revision, e.content_hash, e.embedding <=> $2
         FROM memory_embeddings e
         WHERE e.model_key = %2$L AND e.project = $1
         ORDER BY (e.embedding::%3$s(%1$s)) <=> $2::%3$s(%1$s)
         LIMIT $3', walk_dim, walk_model, graph)
        USING walk_project, walk_vector, walk_limit;
END $$;
