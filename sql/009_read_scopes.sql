-- Every read of the Memory API runs as memory_app, so the policies decide what a caller sees: its projects and,
-- of private units and sources, only its persona's. Row-level security is FORCEd on every memory table (the owner,
-- which runs migrations and the Dagster assets, passes through an explicit policy of its own), and analysts read
-- through memory_reader: SELECT only, never a unit's text.

-- The persona a request reads as (authz.scoped sets memory.persona per transaction; '' names none: NULL here).
CREATE OR REPLACE FUNCTION memory_persona() RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT nullif(current_setting('memory.persona', true), '') $$;

-- A private unit only for its persona (or an operator of the project, who must see it to forget it); scopes are
-- evaluated once per query (initplans, sql/005_rls_initplan.sql).
DROP POLICY IF EXISTS read_scope ON memory_units;
CREATE POLICY read_scope ON memory_units FOR SELECT TO memory_app USING (
    project = ANY ((SELECT memory_scope('read'))::text[])
    AND (private_to IS NULL
         OR (SELECT memory_persona()) = ANY (private_to)
         OR project = ANY ((SELECT memory_scope('forget'))::text[])));

-- A private source (its provenance, its persona's session) only for its persona, likewise.
DROP POLICY IF EXISTS read_scope ON memory_sources;
CREATE POLICY read_scope ON memory_sources FOR SELECT TO memory_app USING (
    project = ANY ((SELECT memory_scope('read'))::text[])
    AND (visibility = 'project'
         OR persona = (SELECT memory_persona())
         OR project = ANY ((SELECT memory_scope('forget'))::text[])));

-- What the newly scoped read paths read besides units and sources: rejection counts (stats), stored bundles
-- (prompt blocks, the agents' bundle).
GRANT SELECT ON memory_rejections, memory_bundles TO memory_app;
DROP POLICY IF EXISTS read_scope ON memory_rejections;
CREATE POLICY read_scope ON memory_rejections FOR SELECT TO memory_app
    USING (project = ANY ((SELECT memory_scope('read'))::text[]));
DROP POLICY IF EXISTS read_scope ON memory_bundles;
CREATE POLICY read_scope ON memory_bundles FOR SELECT TO memory_app
    USING (project = ANY ((SELECT memory_scope('read'))::text[]));

-- The analysts' role: it reads every project's measurements, never writes, and never sees text (titles, bodies,
-- paths, keywords, stored bundles, vectors); notebooks connect with it (analytics.connect).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'memory_reader') THEN
        CREATE ROLE memory_reader NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
END $$;
GRANT memory_reader TO CURRENT_USER;
GRANT USAGE ON SCHEMA public TO memory_reader;

-- FORCE makes the owner subject to the policies too; the owner (migrations, the Dagster assets, the write path)
-- keeps full access through owner_maintenance, a policy for that role alone: on an external server whose owner is
-- no superuser, nothing of the maintenance path changes, while memory_app and memory_reader (not members of the
-- owner) see only what their own policies allow, and a table added later without a policy fails closed.
DO $$
DECLARE
    memory_tables CONSTANT text[] := ARRAY[
        'memory_projects', 'memory_units', 'memory_inbox', 'memory_sources', 'memory_rejections', 'memory_canon',
        'audit_log', 'memory_embeddings', 'memory_changes', 'memory_cursors', 'memory_settings', 'memory_votes',
        'memory_events', 'decay_scores', 'consolidation_clusters', 'memory_bundles', 'memory_switch',
        'memory_task_arms', 'read_rate_metrics'];
    -- text the analysts' role never reads
    hidden CONSTANT jsonb := '{"memory_units": ["title", "body", "paths", "keywords", "tsv"],
                               "memory_inbox": ["title", "body", "paths", "keywords"],
                               "memory_bundles": ["bundle"],
                               "memory_embeddings": ["embedding"]}';
    t text;
    owner_role text;
    readable text;
BEGIN
    FOREACH t IN ARRAY memory_tables LOOP
        SELECT pg_get_userbyid(relowner) INTO owner_role FROM pg_class WHERE oid = t::regclass;
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('DROP POLICY IF EXISTS owner_maintenance ON %I', t);
        EXECUTE format('CREATE POLICY owner_maintenance ON %I TO %I USING (true) WITH CHECK (true)', t, owner_role);

        SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO readable
        FROM pg_attribute
        WHERE attrelid = t::regclass AND attnum > 0 AND NOT attisdropped
          AND NOT attname = ANY (ARRAY(SELECT jsonb_array_elements_text(coalesce(hidden -> t, '[]'))));
        EXECUTE format('GRANT SELECT (%s) ON %I TO memory_reader', readable, t);
        EXECUTE format('DROP POLICY IF EXISTS analyst_read ON %I', t);
        EXECUTE format('CREATE POLICY analyst_read ON %I FOR SELECT TO memory_reader USING (true)', t);
    END LOOP;
END $$;
