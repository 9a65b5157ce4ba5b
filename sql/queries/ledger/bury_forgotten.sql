-- Rows just captured, to fold later, whose content is forgotten in their project (in any wording): linked to the
-- tombstone and blanked at once, as the fold would bury them, so no forgotten text waits in the inbox for a fold.
UPDATE memory_inbox i
SET unit_id = f.unit_id, folded_at = now(), outcome = {inbox_forgotten}, title = '', body = '', paths = '{}',
    keywords = '{}'
FROM memory_forgotten_contents f
WHERE i.idempotency_key = ANY (%(keys)s::text[]) AND coalesce(i.unit_id IS NULL, false)
  AND f.project = i.project AND f.kind = i.kind AND f.content_hash = i.content_hash;
