-- Proposed units curated without a conflict become active once confirmed by enough independent sources, or once
-- old enough, judged at the end of the partition's day (%(day_end)s) with the sources the unit had by then, so a
-- re-run of the day decides the same.
UPDATE memory_units u
SET status = {status_active}, updated_by = 'curation'
WHERE u.status = {status_proposed} AND u.curated_revision = u.revision AND u.conflicts_with IS NULL
  AND u.created_at < %(day_end)s::timestamptz
  AND (u.created_at <= %(cutoff)s::timestamptz
       OR (SELECT count(DISTINCT s.task_id) FROM memory_sources s
           WHERE s.unit_id = u.id AND s.created_at < %(day_end)s::timestamptz) >= %(min_sources)s::int)
RETURNING u.id, u.project;
