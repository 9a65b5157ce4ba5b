-- Dense leg, exact: cosine distance over the serving model's current vectors of the project, filters before LIMIT.
SELECT e.unit_id::text, e.embedding <=> %(vector)s::vector AS distance, u.type = 'episodic' AS episodic
FROM memory_embeddings e
JOIN memory_units u ON u.id = e.unit_id AND u.revision = e.unit_revision AND u.content_hash = e.content_hash
WHERE e.model_key = %(model)s AND e.project = %(project)s AND {recall/_unit_filters}
ORDER BY distance
LIMIT %(candidates)s;
