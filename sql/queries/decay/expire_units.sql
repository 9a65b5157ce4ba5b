-- Mark the live episodes the day's scores found expired, at the day's end %(t)s (never un-expires a unit; a unit
-- that left since, scored again by a re-run of its day, is left as it is).
UPDATE memory_units u SET expired_at = %(t)s::timestamptz, updated_by = 'decay'
FROM decay_scores d
WHERE d.day = %(day)s::date AND d.unit_id = u.id AND d.expired AND u.expired_at IS NULL
  AND u.status IN {live_statuses};
