-- The HNSW knobs of curation/nearest_older_hnsw for the rest of the transaction: results in the graph's distance
-- order (its half-precision copies; the query ranks them by exact distance), the walk extended past ef_search until a
-- vector passes the filters.
SELECT set_config('hnsw.iterative_scan', 'strict_order', true),
       set_config('hnsw.ef_search', %(ef_search)s::int::text, true);
