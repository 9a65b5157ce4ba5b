-- Whether %(new_id)s is already an ancestor of %(old_id)s: superseding would close a cycle (one row) or not (none).
WITH RECURSIVE back(id) AS (
    SELECT supersedes_id FROM memory_units WHERE id = %(old_id)s::uuid
    UNION
    SELECT u.supersedes_id FROM memory_units u JOIN back ON u.id = back.id WHERE u.supersedes_id IS NOT NULL
)
SELECT 1 FROM back WHERE id = %(new_id)s::uuid;
