-- The weekly summaries built from a unit whose words a correction just replaced (a member link names it) retire,
-- their clusters dropped and their members' pointers cleared, so no summary serves the words the correction
-- replaced; re-materialising the week's consolidation rebuilds them from the members' words as they are. Their ids.
WITH retired AS (
    UPDATE memory_units u
    SET status = {status_retired}, updated_by = %(actor)s
    WHERE u.project = %(project)s AND u.created_by = %(feed)s AND u.status IN {live_statuses}
      AND EXISTS (SELECT 1 FROM memory_sources s
                  WHERE s.unit_id = u.id AND s.feed = %(feed)s AND s.task_id = %(unit_id)s::text)
    RETURNING u.id
), dropped AS (
    DELETE FROM consolidation_clusters c WHERE c.consolidated_unit IN (SELECT id FROM retired)
)
SELECT id FROM retired;
