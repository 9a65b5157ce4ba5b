-- Row-level security on project: requests run as the non-owner role memory_app with their scopes set per
-- transaction (memory.read / memory.write / memory.forget hold comma-separated project lists).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'memory_app') THEN
        CREATE ROLE memory_app NOLOGIN NOSUPERUSER NOBYPASSRLS;
    END IF;
END $$;
GRANT memory_app TO CURRENT_USER;

CREATE OR REPLACE FUNCTION memory_scope(scope text) RETURNS text[]
    LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT coalesce(string_to_array(nullif(current_setting('memory.' || scope, true), ''), ','), '{}') $$;

GRANT USAGE ON SCHEMA public TO memory_app;
GRANT SELECT ON memory_units, memory_sources, memory_embeddings, memory_projects, memory_settings TO memory_app;
GRANT INSERT, UPDATE ON memory_units, memory_sources TO memory_app;
GRANT INSERT ON audit_log TO memory_app;
GRANT USAGE ON SEQUENCE audit_log_id_seq, memory_sources_id_seq TO memory_app;

ALTER TABLE memory_units ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_sources ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_embeddings ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_projects ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_inbox ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_rejections ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_canon ENABLE ROW LEVEL SECURITY;
ALTER TABLE audit_log ENABLE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS read_scope ON memory_units;
CREATE POLICY read_scope ON memory_units FOR SELECT TO memory_app USING (project = ANY (memory_scope('read')));
DROP POLICY IF EXISTS write_scope ON memory_units;
CREATE POLICY write_scope ON memory_units FOR UPDATE TO memory_app
    USING (project = ANY (memory_scope('write')) OR project = ANY (memory_scope('forget')))
    WITH CHECK ((status <> 'forgotten' AND project = ANY (memory_scope('write')))
                OR (status = 'forgotten' AND project = ANY (memory_scope('forget'))));
DROP POLICY IF EXISTS insert_scope ON memory_units;
CREATE POLICY insert_scope ON memory_units FOR INSERT TO memory_app WITH CHECK (project = ANY (memory_scope('write')));

DROP POLICY IF EXISTS read_scope ON memory_sources;
CREATE POLICY read_scope ON memory_sources FOR SELECT TO memory_app USING (project = ANY (memory_scope('read')));
DROP POLICY IF EXISTS write_scope ON memory_sources;
CREATE POLICY write_scope ON memory_sources FOR INSERT TO memory_app WITH CHECK (project = ANY (memory_scope('write')));

DROP POLICY IF EXISTS read_scope ON memory_embeddings;
CREATE POLICY read_scope ON memory_embeddings FOR SELECT TO memory_app
    USING (EXISTS (SELECT 1 FROM memory_units u WHERE u.id = unit_id));  -- visible iff its unit is

DROP POLICY IF EXISTS read_scope ON memory_projects;
CREATE POLICY read_scope ON memory_projects FOR SELECT TO memory_app USING (project = ANY (memory_scope('read')));

DROP POLICY IF EXISTS read_scope ON memory_settings;
CREATE POLICY read_scope ON memory_settings FOR SELECT TO memory_app USING (true);
ALTER TABLE memory_settings ENABLE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS append_scope ON audit_log;
CREATE POLICY append_scope ON audit_log FOR INSERT TO memory_app
    WITH CHECK (project IS NULL OR project = ANY (memory_scope('write')) OR project = ANY (memory_scope('forget')));

-- Vectors carry their unit's project so the read policy (and the recall filter) is a plain column test.
ALTER TABLE memory_embeddings ADD COLUMN IF NOT EXISTS project text;
UPDATE memory_embeddings e SET project = u.project FROM memory_units u WHERE u.id = e.unit_id AND e.project IS NULL;
ALTER TABLE memory_embeddings ALTER COLUMN project SET NOT NULL;
DROP POLICY IF EXISTS read_scope ON memory_embeddings;
CREATE POLICY read_scope ON memory_embeddings FOR SELECT TO memory_app USING (project = ANY (memory_scope('read')));
CREATE INDEX IF NOT EXISTS memory_units_project_status ON memory_units (project, status);
