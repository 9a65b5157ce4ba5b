-- The supersession chain through a unit, walked back and forward, oldest first; a walk stops where it would visit a
-- unit again (a cycle, which supersede() rules out, left by a bug or a hand edit would otherwise walk for ever).
WITH RECURSIVE back(id, depth) AS (
    SELECT %(unit_id)s::uuid, 0
    UNION ALL
    SELECT u.supersedes_id, b.depth - 1 FROM memory_units u JOIN back b ON u.id = b.id
    WHERE u.supersedes_id IS NOT NULL
) CYCLE id SET looped USING visited, fwd(id, depth) AS (
    SELECT %(unit_id)s::uuid, 0
    UNION ALL
    SELECT u.id, f.depth + 1 FROM memory_units u JOIN fwd f ON u.supersedes_id = f.id
) CYCLE id SET looped USING visited
SELECT {token_prefix} || u.number AS token, u.status, u.title, u.valid_from, u.valid_until
FROM (SELECT id, min(depth) AS depth
      FROM (SELECT id, depth FROM back WHERE NOT looped UNION ALL SELECT id, depth FROM fwd WHERE NOT looped) walked
      GROUP BY id) c
JOIN memory_units u ON u.id = c.id
ORDER BY c.depth;
