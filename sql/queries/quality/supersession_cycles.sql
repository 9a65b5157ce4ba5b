-- Units on a supersession cycle: walking supersedes_id from a unit leads back to it.
WITH RECURSIVE walk(start, id, depth) AS (
    SELECT id, supersedes_id, 1 FROM memory_units WHERE supersedes_id IS NOT NULL
    UNION ALL
    SELECT w.start, u.supersedes_id, w.depth + 1
    FROM walk w JOIN memory_units u ON u.id = w.id
    WHERE u.supersedes_id IS NOT NULL AND w.id <> w.start AND w.depth < 1000
)
SELECT DISTINCT start::text FROM walk WHERE id = start;
