-- Recall reads one project's vectors: without this index the exact path scanned every project's vectors of the model.
CREATE INDEX IF NOT EXISTS memory_embeddings_project_model ON memory_embeddings (project, model_key);
