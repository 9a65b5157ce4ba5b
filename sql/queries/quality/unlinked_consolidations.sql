-- Consolidated units missing a source for a member, or with a member that does not point back at them.
SELECT c.consolidated_unit::text
FROM consolidation_clusters c, unnest(c.members) AS m(id)
WHERE NOT EXISTS (SELECT 1 FROM memory_sources s WHERE s.unit_id = c.consolidated_unit AND s.task_id = m.id::text)
   OR NOT EXISTS (SELECT 1 FROM memory_units u WHERE u.id = m.id AND u.consolidated_into = c.consolidated_unit)
GROUP BY 1;
