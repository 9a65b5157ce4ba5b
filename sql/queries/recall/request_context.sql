-- A request's first read: the serving model, the project's size (which picks the dense path) and the scan knobs,
-- set locally: ef_search = sqrt(units) between %(ef_floor)s and %(ef_max)s, and the plan mode for the transaction's
-- statements. Where the connection keeps the project's own statements (%(planned)s: their project a literal,
-- database.project_plan) they are planned once: the plan knows the project's size, and an ANALYZE of the units makes
-- it anew (LoCoMo's exact path planned per request spent ~1.1 ms a call on it). Otherwise, on the exact path (a
-- project under %(hnsw_min)s units) they are planned per request: a plan made for any project does not know the
-- project's size, and a 1,000-unit project beside a 100,000-unit one went from 14.6 to 89 ms with one
-- (docs/scaling.md); on the HNSW path they are planned once per connection: PostgreSQL's own choice ('auto') kept
-- planning them for every request (~3-5 ms of a 10k-unit call: 13.4 -> 8.4 ms p50 with the generic plan, the same
-- top 10) and, where it did switch, chose the same generic plan. No parallel workers: a request reads a few hundred
-- rows, and at 100k units the planner gave the exact scan (the HNSW path's fallback, which seldom runs) two workers
-- that were started for every request, ~7 ms each time (docs/scaling.md).
SELECT {embeddings/_serving_model}, p.units,
       ef.value,
       set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', ef.value::text, true),
       set_config('plan_cache_mode',
                  CASE WHEN %(planned)s::boolean OR p.units >= %(hnsw_min)s THEN 'force_generic_plan'
                       ELSE 'force_custom_plan' END, true),
       set_config('max_parallel_workers_per_gather', '0', true)
FROM (SELECT coalesce(memory_last_number(%(project)s), 0) AS units) AS p,
     LATERAL (SELECT greatest(%(ef_floor)s, least(%(ef_max)s, round(sqrt(p.units))::int)) AS value) AS ef;
