-- Inbox rows whose content was forgotten in their project: linked to the tombstone, their text blanked at once.
UPDATE memory_inbox i
SET unit_id = u.id, folded_at = now(), outcome = {inbox_forgotten}, title = '', body = '', paths = '{}',
    keywords = '{}'
FROM memory_units u
WHERE {ledger/_unfolded_inbox}
  AND i.project = ANY (%(projects)s::text[])
  AND u.project = i.project AND u.kind = i.kind AND u.content_hash = i.content_hash
  AND u.status = {status_forgotten};
