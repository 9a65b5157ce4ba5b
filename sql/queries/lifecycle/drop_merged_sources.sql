-- Take off the units a forgotten unit was merged into (along the duplicate_of chain) the sources the merge copied
-- from it: a copy keeps the task, the inbox row and the time of the source it came from.
WITH RECURSIVE canon(unit_id, source_unit) AS (
    SELECT duplicate_of, id FROM memory_units WHERE id = ANY (%(ids)s::uuid[]) AND duplicate_of IS NOT NULL
    UNION
    SELECT u.duplicate_of, c.source_unit
    FROM canon c JOIN memory_units u ON u.id = c.unit_id
    WHERE u.duplicate_of IS NOT NULL
)
DELETE FROM memory_sources copy
USING canon k, memory_sources s
WHERE copy.unit_id = k.unit_id AND NOT k.unit_id = ANY (%(ids)s::uuid[])
  AND s.unit_id = k.source_unit
  AND copy.task_id IS NOT DISTINCT FROM s.task_id AND copy.inbox_id IS NOT DISTINCT FROM s.inbox_id
  AND copy.created_at = s.created_at;
