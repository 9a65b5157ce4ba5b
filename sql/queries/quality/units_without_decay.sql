-- Live units created before the end of %(day)s that have no decay score for the day.
SELECT u.id::text
FROM memory_units u
WHERE u.status IN {live_statuses}
  AND u.created_at < (%(day)s::date + 1)::timestamptz
  AND NOT EXISTS (SELECT 1 FROM decay_scores d WHERE d.day = %(day)s::date AND d.unit_id = u.id);
