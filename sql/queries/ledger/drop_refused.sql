-- Remove captured rows that no fold can take (the database refuses their unit), and how many by project and feed,
-- for the caller to count as rejections (capture.record_rejection; the text is never kept): left in the inbox, they
-- would fail every later fold of their day.
WITH dropped AS (
    DELETE FROM memory_inbox WHERE idempotency_key = ANY (%(keys)s::text[]) AND unit_id IS NULL
    RETURNING project, feed
)
SELECT project, feed, count(*)::int FROM dropped GROUP BY project, feed ORDER BY project, feed;
