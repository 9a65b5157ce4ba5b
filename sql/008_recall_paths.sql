-- Recall's exact path reads one project's vectors of the serving model. Without this index the planner either
-- scanned every project's vectors (LoCoMo's seven dialog projects: 2.8 -> 2.3 ms per query with it) or probed them one unit
-- at a time through the primary key (1,000 units beside 50,000 others: 7.7 -> 6.7 ms per recall with it).
CREATE INDEX IF NOT EXISTS memory_embeddings_project_model ON memory_embeddings (project, model_key);
