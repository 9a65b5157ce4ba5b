-- The write transaction's planner settings (transaction-local): generic plans, since every statement selects by
-- key or id and planning the fold anew would cost more than running it; and no sequential scans, since a
-- connection keeps its generic plans until the next ANALYZE, and plans made on small tables read memory_units and
-- memory_inbox whole on every write after they grew.
SELECT set_config('plan_cache_mode', 'force_generic_plan', true),
       set_config('enable_seqscan', 'off', true);
