-- Fold the unfolded inbox rows with the given idempotency keys into the ledger: memory_fold
-- (sql/018_fold_functions.sql), the one fold; how many projects it folded, units it inserted, sources it linked
-- and rows it buried.
SELECT projects_folded, units_inserted, sources_linked, rows_buried
FROM memory_fold(%(keys)s::text[], %(trust)s::real);
