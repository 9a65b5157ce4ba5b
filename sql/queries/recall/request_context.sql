-- A request's first read: the serving model, the project's size (which picks the dense path) and the scan knobs,
-- set locally: ef_search = sqrt(units) between %(ef_floor)s and %(ef_max)s, and the plan: made once per connection
-- and project (recall/candidates names its project as a literal, database.for_project), so it knows the project's
-- size, which a plan made for any project did not (a 1,000-unit project beside a 100,000-unit one went from 14.6 to
-- 89 ms with one); an ANALYZE of the units makes it anew. Planned per request instead, LoCoMo's exact path spent
-- ~1 ms a call planning (10.5 against 12.5 ms p50 cached), and PostgreSQL's own choice ('auto') kept planning the
-- HNSW path for every request (13.4 -> 8.4 ms p50 at 10k units; docs/scaling.md). No parallel workers: a request
-- reads a few hundred rows, and at 100k units the planner gave the exact scan (the HNSW path's fallback, which
-- seldom runs) two workers that were started for every request, ~7 ms each time (docs/scaling.md).
SELECT {embeddings/_serving_model}, p.units,
       ef.value,
       set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', ef.value::text, true),
       set_config('plan_cache_mode', 'force_generic_plan', true),
       set_config('max_parallel_workers_per_gather', '0', true)
FROM (SELECT coalesce((SELECT last_number FROM memory_projects WHERE project = %(project)s), 0) AS units) AS p,
     LATERAL (SELECT greatest(%(ef_floor)s, least(%(ef_max)s, round(sqrt(p.units))::int)) AS value) AS ef;
