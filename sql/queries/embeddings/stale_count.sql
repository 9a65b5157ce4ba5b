-- How many units lack a current vector of %(model)s, counted up to %(limit)s (the count stops there): the vectors a
-- model with no HNSW index yet would write before its graph is built over them (embeddings.index_before_writes).
SELECT count(*)
FROM (SELECT 1
      FROM memory_units u
      LEFT JOIN memory_embeddings e ON e.unit_id = u.id AND e.model_key = %(model)s::text
      WHERE {embeddings/_embeddable}
        AND (e.unit_id IS NULL OR e.unit_revision <> u.revision OR e.content_hash <> u.content_hash)
      LIMIT %(limit)s::bigint) AS stale;
