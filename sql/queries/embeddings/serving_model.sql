-- The model recall serves.
SELECT {embeddings/_serving_model};
