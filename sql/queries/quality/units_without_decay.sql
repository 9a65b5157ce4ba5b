-- Units created and live at the end of %(day)s (%(t)s) that have no decay score for the day.
SELECT u.id::text
FROM ({decay/_units_live_at}) u
WHERE NOT EXISTS (SELECT 1 FROM decay_scores d WHERE d.day = %(day)s::date AND d.unit_id = u.id);
