-- The write transaction's planner settings (transaction-local), as memory_fold and memory_remember_gated carry them:
-- generic plans, since every statement selects by key or id and planning it anew would cost more than running it;
-- no sequential scans, since a connection keeps its generic plans until the next ANALYZE, and plans made on small
-- tables would read whole tables on every write once they grew.
SELECT set_config('plan_cache_mode', 'force_generic_plan', true),
       set_config('enable_seqscan', 'off', true);
