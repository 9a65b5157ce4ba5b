-- Inbox rows whose content was forgotten in their project: linked to the tombstone, their text blanked at once.
UPDATE memory_inbox i
SET unit_id = u.id, folded_at = now(), outcome = 'forgotten', title = '', body = '', paths = '{}', keywords = '{}'
FROM memory_units u
WHERE i.unit_id IS NULL
  AND (%(day)s::date IS NULL OR (i.received_at AT TIME ZONE 'UTC')::date = %(day)s::date)
  AND (%(ids)s::bigint[] IS NULL OR i.id = ANY (%(ids)s::bigint[]))
  AND i.project = ANY (%(projects)s::text[])
  AND u.project = i.project AND u.kind = i.kind AND u.content_hash = i.content_hash AND u.status = 'forgotten';
