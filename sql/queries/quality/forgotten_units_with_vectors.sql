-- Forgotten units that still hold a vector in some model.
SELECT DISTINCT e.unit_id
FROM memory_embeddings e
JOIN memory_units u ON u.id = e.unit_id
WHERE u.status = {status_forgotten};
