-- A request's first read: the serving model, the project's size (which picks the dense path) and the scan knobs,
-- set locally: ef_search = sqrt(units) between %(ef_floor)s and %(ef_max)s, and the recall statement's one generic
-- plan, never a plan per request: with the query's tsquery parsed once (recall/candidates) the generic plan ran the
-- LoCoMo statement 2 ms faster at p50 than a custom plan, whose planning alone took ~3 ms (docs/scaling.md). No
-- parallel workers: a request reads a few hundred rows, and at 100k units the planner gave the exact scan (the HNSW
-- path's fallback, which seldom runs) two workers that were started for every request, ~7 ms each time.
SELECT {embeddings/_serving_model}, p.units,
       ef.value,
       set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', ef.value::text, true),
       set_config('plan_cache_mode', 'force_generic_plan', true),
       set_config('max_parallel_workers_per_gather', '0', true)
FROM (SELECT coalesce((SELECT last_number FROM memory_projects WHERE project = %(project)s), 0) AS units) AS p,
     LATERAL (SELECT greatest(%(ef_floor)s, least(%(ef_max)s, round(sqrt(p.units))::int)) AS value) AS ef;
