-- Evaluate the caller's scope once per query (an initplan), not once per row: recall scans stay at pgvector speed.
DROP POLICY IF EXISTS read_scope ON memory_units;
CREATE POLICY read_scope ON memory_units FOR SELECT TO memory_app USING (project = ANY ((SELECT memory_scope('read'))::text[]));
DROP POLICY IF EXISTS read_scope ON memory_sources;
CREATE POLICY read_scope ON memory_sources FOR SELECT TO memory_app USING (project = ANY ((SELECT memory_scope('read'))::text[]));
DROP POLICY IF EXISTS read_scope ON memory_embeddings;
CREATE POLICY read_scope ON memory_embeddings FOR SELECT TO memory_app
    USING (project = ANY ((SELECT memory_scope('read'))::text[]));
DROP POLICY IF EXISTS read_scope ON memory_projects;
CREATE POLICY read_scope ON memory_projects FOR SELECT TO memory_app USING (project = ANY ((SELECT memory_scope('read'))::text[]));
DROP POLICY IF EXISTS read_scope ON decay_scores;
CREATE POLICY read_scope ON decay_scores FOR SELECT TO memory_app USING (project = ANY ((SELECT memory_scope('read'))::text[]));
