-- After curation/nearest_older_hnsw: the sort and JIT settings curation/hnsw_scan found, for the rest of the
-- transaction (the exact scan, a merge or a review).
SELECT set_config('enable_sort', %(sorts)s::text, true), set_config('jit', %(jit)s::text, true);
