-- How many units can hold vectors (all but tombstones), counted up to %(limit)s (the count stops there): at most what
-- the graph of a model with no HNSW index yet covers when it is built after the run's vectors, those of earlier runs
-- included (embeddings.index_before_writes).
SELECT count(*)
FROM (SELECT 1 FROM memory_units u WHERE {embeddings/_embeddable} LIMIT %(limit)s::bigint) AS embeddable;
