-- Units waiting for a review decision, oldest first.
SELECT project, {token_prefix} || number AS token, kind, created_at
FROM memory_units
WHERE status = {status_review}
ORDER BY created_at;
