-- A request's first read: the serving model, the project's size (which picks the dense path) and the scan knobs,
-- set locally: ef_search = sqrt(units) between %(ef_floor)s and %(ef_max)s, and on the exact path (a project under
-- %(hnsw_min)s units) a plan per request: on LoCoMo the recall statement planned for its project and terms ran 1.2x
-- faster at p50 than the generic plan PostgreSQL settles on for a prepared statement (docs/scaling.md). No parallel
-- workers: a request reads a few hundred rows, and at 100k units the planner gave the exact scan (the HNSW path's
-- fallback, which seldom runs) two workers that were started for every request, ~7 ms each time (docs/scaling.md).
SELECT {embeddings/_serving_model}, p.units,
       ef.value,
       set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', ef.value::text, true),
       set_config('plan_cache_mode', CASE WHEN p.units < %(hnsw_min)s THEN 'force_custom_plan' ELSE 'auto' END, true),
       set_config('max_parallel_workers_per_gather', '0', true)
FROM (SELECT coalesce((SELECT last_number FROM memory_projects WHERE project = %(project)s), 0) AS units) AS p,
     LATERAL (SELECT greatest(%(ef_floor)s, least(%(ef_max)s, round(sqrt(p.units))::int)) AS value) AS ef;
