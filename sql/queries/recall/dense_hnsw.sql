-- Dense leg for large projects: an approximate first phase over the model's partial HNSW index (pgvector 0.8
-- iterative scan, filtering on the project column inside the scan), then the join that binds vectors to
-- revisions and every other filter. {dim} and {model} are composed per model so the index predicate matches.
-- When fewer rows than needed survive, the caller falls back to dense_exact.
WITH near AS MATERIALIZED (
    SELECT e.unit_id, e.unit_revision, e.content_hash,
           (e.embedding::vector({dim})) <=> %(vector)s::vector({dim}) AS distance
    FROM memory_embeddings e
    WHERE e.model_key = {model} AND e.project = %(project)s
    ORDER BY (e.embedding::vector({dim})) <=> %(vector)s::vector({dim})
    LIMIT %(overfetch)s
)
SELECT n.unit_id::text, n.distance, u.type = 'episodic' AS episodic FROM near n
JOIN memory_units u ON u.id = n.unit_id AND u.revision = n.unit_revision AND u.content_hash = n.content_hash
WHERE {recall/_unit_filters}
ORDER BY n.distance
LIMIT %(candidates)s;
