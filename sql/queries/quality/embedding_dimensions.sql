-- The distinct dimensions of each model's vectors.
SELECT model_key, array_agg(DISTINCT vector_dims(embedding)) FROM memory_embeddings GROUP BY model_key;
