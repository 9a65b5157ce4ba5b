-- Whether %(new_id)s is already an ancestor of %(old_id)s: superseding would close a cycle (one row) or not (none);
-- the walk stops at a unit it visited (a cycle left by a bug must not make the check walk for ever).
WITH RECURSIVE back(id) AS (
    SELECT supersedes_id FROM memory_units WHERE id = %(old_id)s::uuid
    UNION ALL
    SELECT u.supersedes_id FROM memory_units u JOIN back ON u.id = back.id WHERE u.supersedes_id IS NOT NULL
) CYCLE id SET looped USING visited
SELECT 1 FROM back WHERE id = %(new_id)s::uuid;
