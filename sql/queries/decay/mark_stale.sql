-- Turn the active units whose decayed trust the day's scores found too low into stale ones (never back), from a unit's
-- latest scored day only: a re-run of an earlier day never marks a unit confirmed since.
UPDATE memory_units u SET status = {status_stale}, updated_by = 'decay'
FROM decay_scores d
WHERE d.day = %(day)s::date AND d.unit_id = u.id AND d.stale AND u.status = {status_active}
  AND NOT EXISTS (SELECT 1 FROM decay_scores l WHERE l.unit_id = u.id AND l.day > %(day)s::date);
