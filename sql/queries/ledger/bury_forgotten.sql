-- Rows just captured, to fold later, whose content is forgotten in their project (a tombstone's last wording or one
-- it held before a correction): linked to the tombstone and blanked at once, as the fold would bury them, so no
-- forgotten text waits in the inbox for a fold. Each row probes the two forgotten-content indexes by its key.
UPDATE memory_inbox i
SET unit_id = f.id, folded_at = now(), outcome = {inbox_forgotten}, title = '', body = '', paths = '{}',
    keywords = '{}'
FROM memory_inbox j
CROSS JOIN LATERAL (
    SELECT u.id FROM memory_units u
    WHERE u.project = j.project AND u.kind = j.kind AND u.content_hash = j.content_hash
      AND u.status = {status_forgotten}
    UNION ALL
    SELECT u.id FROM memory_former_wordings w JOIN memory_units u ON u.id = w.unit_id
    WHERE w.project = j.project AND w.kind = j.kind AND w.content_hash = j.content_hash
      AND u.status = {status_forgotten}
    LIMIT 1) AS f
WHERE j.idempotency_key = ANY (%(keys)s::text[]) AND coalesce(j.unit_id IS NULL, false) AND i.id = j.id;
