-- The benchmark's numpy baseline: the project's current serving vectors of active units valid now (the same
-- vectors and filter recall searches).
SELECT u.id::text, e.embedding
FROM memory_embeddings e
JOIN memory_units u ON u.id = e.unit_id AND u.revision = e.unit_revision
WHERE u.project = %(project)s AND u.status = {status_active} AND u.valid_from <= now()
  AND (u.valid_until IS NULL OR u.valid_until > now()) AND e.model_key = %(model)s;
