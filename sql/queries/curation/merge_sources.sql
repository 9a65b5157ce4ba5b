-- Copy a near-duplicate's sources (provenance included) to the unit it merges into; one source per task.
INSERT INTO memory_sources (unit_id, project, {provenance_columns}, inbox_id, created_at)
SELECT %(canonical)s::uuid, project, {provenance_columns}, inbox_id, created_at
FROM memory_sources
WHERE unit_id = %(newcomer)s::uuid
ORDER BY id
ON CONFLICT (unit_id, task_id) DO NOTHING;
