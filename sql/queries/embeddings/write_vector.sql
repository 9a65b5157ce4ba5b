-- Write one unit's vector, only while the unit still has the revision it was computed from (FOR SHARE waits for
-- a correction in flight) and never over a vector of a newer revision or of other content; at the same revision
-- only when the embedded text differs (a context-aware model whose neighbouring turn changed). A vector that embeds
-- a previous turn is written only while that turn is still at the revision read and not forgotten (FOR SHARE: a
-- forget in flight waits, then its trigger deletes this vector), so forgotten text never comes back into one.
INSERT INTO memory_embeddings (unit_id, project, model_key, unit_revision, content_hash, text_digest, model_name,
                               model_revision, dim, embedding)
SELECT u.id, u.project, %(model)s::text, u.revision, u.content_hash, %(digest)s::text, %(name)s::text,
       %(revision)s::text, %(dim)s::integer, %(vector)s::vector
FROM memory_units u
WHERE u.id = %(unit_id)s::uuid AND u.revision = %(unit_revision)s::integer AND {embeddings/_embeddable}
  AND (%(prev_id)s::uuid IS NULL OR EXISTS (
        SELECT 1 FROM memory_units p
        WHERE p.id = %(prev_id)s::uuid AND p.revision = %(prev_revision)s::integer AND p.status <> {status_forgotten}
        FOR SHARE))
FOR SHARE
ON CONFLICT (unit_id, model_key) DO UPDATE
SET unit_revision = EXCLUDED.unit_revision, content_hash = EXCLUDED.content_hash, text_digest = EXCLUDED.text_digest,
    embedding = EXCLUDED.embedding, dim = EXCLUDED.dim, embedded_at = now()
WHERE memory_embeddings.unit_revision < EXCLUDED.unit_revision
   OR memory_embeddings.content_hash <> EXCLUDED.content_hash
   OR memory_embeddings.text_digest <> EXCLUDED.text_digest;  -- same revision, other text: its turn context moved
