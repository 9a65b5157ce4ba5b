-- Days with inbox rows not yet folded, each with its newest inbox id (a run key that changes with new rows).
SELECT (received_at AT TIME ZONE 'UTC')::date AS day, max(id)
FROM memory_inbox
WHERE unit_id IS NULL
GROUP BY 1
ORDER BY 1;
