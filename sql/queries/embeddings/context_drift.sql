-- Episodic units whose %(model)s vector is current (revision and content) but whose turn context may have moved
-- on (a neighbour corrected or forgotten): those of a UTC creation %(day)s, or those up to %(context_scan)s turns
-- after a unit among %(ids)s; with their context and the stored text digest, which the caller compares with the
-- digest of the text it would embed now. Keyset pages by id after %(after)s.
SELECT u.id, u.revision, u.content_hash, u.title, u.body, u.keywords, own.speaker, prev.prev_speaker, prev.prev_body,
       prev.prev_id, prev.prev_revision,
       e.text_digest
FROM memory_units u
JOIN memory_embeddings e ON e.unit_id = u.id AND e.model_key = %(model)s::text
                        AND e.unit_revision = u.revision AND e.content_hash = u.content_hash
{embeddings/_turn_context}
WHERE {embeddings/_embeddable} AND u.type = 'episodic'
  AND (%(day)s::date IS NULL OR (u.created_at AT TIME ZONE 'UTC')::date = %(day)s::date)
  AND (%(ids)s::uuid[] IS NULL OR EXISTS (
        SELECT 1 FROM memory_units c
        WHERE c.id = ANY (%(ids)s::uuid[]) AND c.project = u.project
          AND u.number BETWEEN c.number + 1 AND c.number + %(context_scan)s))
  AND (%(after)s::uuid IS NULL OR u.id > %(after)s::uuid)
ORDER BY u.id
LIMIT %(limit)s::bigint;
