-- The units of %(project)s not yet forgotten that hold text derived from the given forgotten units: weekly
-- summaries built from them (a member link names them: the current summary and those earlier runs of the week
-- retired, or a cluster lists them) and near-duplicates a merge retired into them (the same fact in other words).
SELECT u.id
FROM memory_units u
WHERE u.project = %(project)s AND u.status <> {status_forgotten}
  AND ((u.created_by = %(feed)s AND EXISTS (
            SELECT 1 FROM memory_sources s
            WHERE s.unit_id = u.id AND s.feed = %(feed)s AND s.task_id = ANY (%(ids)s::uuid[]::text[])))
       OR EXISTS (SELECT 1 FROM consolidation_clusters c
                  WHERE c.consolidated_unit = u.id AND c.members && %(ids)s::uuid[])
       OR u.duplicate_of = ANY (%(ids)s::uuid[]))
ORDER BY u.number;
