-- A request's first read: the serving model, the project's size (which picks the dense path) and the scan knobs,
-- set locally: ef_search = sqrt(units) between %(ef_floor)s and %(ef_max)s, and on the exact path (a project under
-- %(hnsw_min)s units) a plan per request. A generic plan ran the LoCoMo statement 2 ms faster (seven projects of
-- one size), but a store's projects differ in size and a generic plan does not know which it serves: a 1,000-unit
-- project beside a 100,000-unit one went from 14.6 to 89 ms on the exact path, and on the HNSW path from 7.4 to 155
-- ms with 0.68 of the exact top 10 (docs/scaling.md). No parallel workers: a request reads a few hundred rows, and
-- at 100k units the planner gave the exact scan (the HNSW path's fallback, which seldom runs) two workers that were
-- started for every request, ~7 ms each time (docs/scaling.md).
SELECT {embeddings/_serving_model}, p.units,
       ef.value,
       set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', ef.value::text, true),
       set_config('plan_cache_mode', CASE WHEN p.units < %(hnsw_min)s THEN 'force_custom_plan' ELSE 'auto' END, true),
       set_config('max_parallel_workers_per_gather', '0', true)
FROM (SELECT coalesce((SELECT last_number FROM memory_projects WHERE project = %(project)s), 0) AS units) AS p,
     LATERAL (SELECT greatest(%(ef_floor)s, least(%(ef_max)s, round(sqrt(p.units))::int)) AS value) AS ef;
