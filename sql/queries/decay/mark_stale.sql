-- Turn the active units whose decayed trust the day's scores found too low into stale ones (never back), from a unit's
-- latest scored day only (decay/_latest_scored).
UPDATE memory_units u SET status = {status_stale}, updated_by = 'decay'
FROM decay_scores d
WHERE d.day = %(day)s::date AND d.unit_id = u.id AND d.stale AND u.status = {status_active}
  AND {decay/_latest_scored};
