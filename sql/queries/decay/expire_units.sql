-- Mark the live episodes the day's scores found expired, at the day's end %(t)s (never un-expires a unit), from a
-- unit's latest scored day only (decay/_latest_scored): a re-run of an earlier day leaves a unit that left or was
-- used since as it is.
UPDATE memory_units u SET expired_at = %(t)s::timestamptz, updated_by = 'decay'
FROM decay_scores d
WHERE d.day = %(day)s::date AND d.unit_id = u.id AND d.expired AND u.expired_at IS NULL
  AND u.status IN {live_statuses} AND {decay/_latest_scored};
