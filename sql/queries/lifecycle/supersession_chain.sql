-- The supersession chain through a unit, walked back and forward, oldest first.
WITH RECURSIVE back(id, depth) AS (
    SELECT %(unit_id)s::uuid, 0
    UNION
    SELECT u.supersedes_id, b.depth - 1 FROM memory_units u JOIN back b ON u.id = b.id
    WHERE u.supersedes_id IS NOT NULL
), fwd(id, depth) AS (
    SELECT %(unit_id)s::uuid, 0
    UNION
    SELECT u.id, f.depth + 1 FROM memory_units u JOIN fwd f ON u.supersedes_id = f.id
)
SELECT {token_prefix} || u.number AS token, u.status, u.title, u.valid_from, u.valid_until
FROM (SELECT * FROM back UNION SELECT * FROM fwd) c
JOIN memory_units u ON u.id = c.id
ORDER BY c.depth;
