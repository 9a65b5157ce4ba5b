-- The HNSW knobs of curation/nearest_older_hnsw for the rest of the transaction: results in the graph's distance
-- order (its half-precision copies; the query ranks them by exact distance), the walk extended past ef_search until a
-- vector passes the filters, and sorts off, so the statement is planned as the walk even on statistics that have not
-- seen the day's vectors (they made the planner sort all of a 6,000-unit project's vectors instead: 7.1 against
-- 0.63 ms, docs/scaling.md item 39). The statement's last step still sorts its ~100 rows: before PostgreSQL 18 a
-- disabled sort adds 1e10 to the plan's cost, past every JIT threshold, so JIT is off too (compiling a 1 ms statement
-- would cost tens of ms). Returns both settings as they were, read before any is set, for curation/hnsw_scan_done.
SELECT was.sorts, was.jit,
       set_config('hnsw.iterative_scan', 'strict_order', true),
       set_config('hnsw.ef_search', %(ef_search)s::int::text, true),
       set_config('enable_sort', 'off', true), set_config('jit', 'off', true)
FROM (SELECT current_setting('enable_sort') AS sorts, current_setting('jit') AS jit OFFSET 0) AS was;
