-- Units (of a UTC creation %(day)s, or by %(ids)s) whose vector for %(model)s is missing or bound to an older
-- revision or content, oldest first, at most %(limit)s; with their turn context when %(context)s (else NULLs).
SELECT u.id, u.revision, u.content_hash, u.title, u.body, u.keywords, own.speaker, prev.prev_speaker, prev.prev_body,
       prev.prev_id, prev.prev_revision
FROM memory_units u
LEFT JOIN memory_embeddings e ON e.unit_id = u.id AND e.model_key = %(model)s::text
{embeddings/_turn_context}
WHERE {embeddings/_embeddable}
  AND (%(day)s::date IS NULL OR (u.created_at AT TIME ZONE 'UTC')::date = %(day)s::date)
  AND (%(ids)s::uuid[] IS NULL OR u.id = ANY (%(ids)s::uuid[]))
  AND (e.unit_id IS NULL OR e.unit_revision <> u.revision OR e.content_hash <> u.content_hash)
ORDER BY u.created_at, u.number
LIMIT %(limit)s::bigint;
