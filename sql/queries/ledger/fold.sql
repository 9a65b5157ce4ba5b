-- Fold the unfolded inbox rows with the given idempotency keys (of the given projects) into the ledger: memory_fold
-- (sql/018_fold_functions.sql), the one fold; how many units it inserted, sources it linked and rows it buried.
SELECT units_inserted, sources_linked, rows_buried
FROM memory_fold(%(keys)s::text[], %(projects)s::text[], %(trust)s::real);
