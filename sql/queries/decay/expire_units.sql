-- Mark the episodes the day's scores found expired, at the day's end %(t)s (never un-expires a unit).
UPDATE memory_units u SET expired_at = %(t)s::timestamptz, updated_by = 'decay'
FROM decay_scores d
WHERE d.day = %(day)s::date AND d.unit_id = u.id AND d.expired AND u.expired_at IS NULL;
