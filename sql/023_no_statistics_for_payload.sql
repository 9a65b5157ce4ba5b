-- No planner statistics for the units' payload and bookkeeping columns: no plan is chosen by them (the text is
-- read, blanked or searched through tsv, which keeps its statistics; created_by only filters units already found
-- by project or id), yet ANALYZE detoasted and sorted a 30,000-row sample of each. At 40,000 units it took 369 ms,
-- 243 ms without them (median of five on the EPYC), and the import ends with one (database.refresh_statistics,
-- docs/scaling.md item 11), as autovacuum's runs and the graph's assets do.
ALTER TABLE memory_units
    ALTER COLUMN title SET STATISTICS 0,
    ALTER COLUMN body SET STATISTICS 0,
    ALTER COLUMN keywords SET STATISTICS 0,
    ALTER COLUMN created_by SET STATISTICS 0,
    ALTER COLUMN updated_by SET STATISTICS 0,
    ALTER COLUMN updated_at SET STATISTICS 0;
