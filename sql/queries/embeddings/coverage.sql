-- Active units, and how many of them have a vector of %(model)s at their current revision and content.
SELECT count(*), count(e.unit_id)
FROM memory_units u
LEFT JOIN memory_embeddings e ON e.unit_id = u.id AND e.model_key = %(model)s::text
                             AND e.unit_revision = u.revision AND e.content_hash = u.content_hash
WHERE u.status = {status_active};
