-- Drop the consolidation clusters a forgotten unit belonged to or summarised, or whose summary a correction of a
-- member retired (the next weekly run rebuilds them from the members as they are); their members stop pointing at
-- the summary.
WITH dropped AS (
    DELETE FROM consolidation_clusters
    WHERE consolidated_unit = ANY (%(ids)s::uuid[]) OR members && %(ids)s::uuid[]
    RETURNING members
)
UPDATE memory_units u
SET consolidated_into = NULL
FROM (SELECT DISTINCT unnest(members) AS id FROM dropped) m
WHERE u.id = m.id AND u.consolidated_into IS NOT NULL;
