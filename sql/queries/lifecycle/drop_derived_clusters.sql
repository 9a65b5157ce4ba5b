-- Drop the consolidation clusters a forgotten unit belonged to or summarised (the next weekly run rebuilds them
-- from the members that remain); their members stop pointing at the tombstoned summary.
WITH dropped AS (
    DELETE FROM consolidation_clusters
    WHERE consolidated_unit = ANY (%(ids)s::uuid[]) OR members && %(ids)s::uuid[]
    RETURNING members
)
UPDATE memory_units u
SET consolidated_into = NULL
FROM (SELECT DISTINCT unnest(members) AS id FROM dropped) m
WHERE u.id = m.id AND u.consolidated_into IS NOT NULL;
