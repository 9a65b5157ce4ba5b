-- The unit a cluster's summary is, given the unit remember() returned for its text: the live unit holding that
-- content; else, when an earlier run of the week retired it as stale, that unit made active again; else the unit
-- as it is (a reviewer rejected it, or curation merged it into an older unit: neither is undone here).
WITH live AS (
    SELECT t.id
    FROM memory_units u
    JOIN memory_units t ON t.project = u.project AND t.kind = u.kind AND t.content_hash = u.content_hash
                       AND t.status IN {live_statuses}
    WHERE u.id = %(unit_id)s::uuid
), revived AS (
    UPDATE memory_units u
    SET status = {status_active}, updated_by = %(feed)s
    WHERE u.id = %(unit_id)s::uuid AND NOT EXISTS (SELECT 1 FROM live)
      AND u.status = {status_retired} AND u.updated_by = %(feed)s AND u.duplicate_of IS NULL
    RETURNING u.id
)
SELECT coalesce((SELECT id FROM live LIMIT 1), (SELECT id FROM revived), %(unit_id)s::uuid);
