-- Remove captured rows that no fold can take (the database refuses their unit), counted as rejections by project,
-- feed and reason (the text is never kept): left in the inbox, they would fail every later fold of their day.
WITH dropped AS (
    DELETE FROM memory_inbox WHERE idempotency_key = ANY (%(keys)s::text[]) AND unit_id IS NULL
    RETURNING project, feed
)
INSERT INTO memory_rejections (project, feed, reason, day, count)
SELECT project, feed, %(reason)s, current_date, count(*) FROM dropped GROUP BY project, feed
ON CONFLICT (project, feed, reason, day) DO UPDATE SET count = memory_rejections.count + EXCLUDED.count;
