-- Units created and live at the end of %(day)s (%(t)s) that have no decay score for the day.
SELECT u.id::text
FROM memory_units u
LEFT JOIN ({decay/_status_since}) since ON since.unit_id = u.id
WHERE u.created_at < %(t)s AND coalesce(since.status, u.status) IN {live_statuses}
  AND NOT EXISTS (SELECT 1 FROM decay_scores d WHERE d.day = %(day)s::date AND d.unit_id = u.id);
