-- Whether a table changed past autovacuum's analyze threshold (the server's own settings) since its last ANALYZE:
-- the rows changed since, or the rows the caller wrote on another connection (whose counters may come later),
-- against the threshold over the rows the last ANALYZE or VACUUM counted (-1: never analysed).
SELECT c.reltuples < 0
       OR greatest(coalesce(s.n_mod_since_analyze, 0), %(written)s)
          > current_setting('autovacuum_analyze_threshold')::float8
            + current_setting('autovacuum_analyze_scale_factor')::float8 * c.reltuples
FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE c.oid = %(table)s::regclass;
