-- Drop a project's clusters of a week (a run replaces them); their members stop pointing at a summary until this
-- run links them again. Returns the summaries the dropped clusters named.
WITH dropped AS (
    DELETE FROM consolidation_clusters
    WHERE week_start = %(week_start)s AND project = %(project)s
    RETURNING consolidated_unit, members
), released AS (
    UPDATE memory_units u
    SET consolidated_into = NULL
    FROM (SELECT DISTINCT unnest(members) AS id FROM dropped) m
    WHERE u.id = m.id AND u.consolidated_into IS NOT NULL
)
SELECT DISTINCT consolidated_unit FROM dropped;
