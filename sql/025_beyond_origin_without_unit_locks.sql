-- sql/024's triggers marked a unit whose sources grew beyond its origin by updating its row: the fold then took row
-- locks it never took before, while it held the project's counter row. A duplicate from another task waited behind
-- any open update of that unit (decay, curation, a vote), every write of the project waited behind it, a bulk fold
-- could deadlock with decay's two-statement update, and the update stamped the unit's updated_at. The mark now goes
-- to a side table instead: an insert there locks nothing of the unit and never fires the units' triggers (no
-- foreign key either: its key-share check made a source's delete wait on a merge's FOR UPDATE of the unit; a mark
-- outliving its unit joins nothing). memory_units.sources_beyond_origin keeps what a unit was born with (false only
-- from the two folds); recall reads a unit's sources when it is true or the unit is marked here.
CREATE TABLE IF NOT EXISTS memory_units_beyond_origin (
    unit_id uuid PRIMARY KEY,
    project text NOT NULL
);
-- recall reads a project's marks once per request (its plan hashes them) rather than probing the key per candidate
CREATE INDEX IF NOT EXISTS memory_units_beyond_origin_project ON memory_units_beyond_origin (project, unit_id);
-- Like every memory table (sql/009): row-level security forced, the owner through its own policy (the triggers
-- below write as the owner), memory_app reading the marks of the units it may see, the analysts reading them all.
GRANT SELECT ON memory_units_beyond_origin TO memory_app, memory_reader;
ALTER TABLE memory_units_beyond_origin ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_units_beyond_origin FORCE ROW LEVEL SECURITY;
DO $$
BEGIN
    EXECUTE 'DROP POLICY IF EXISTS owner_maintenance ON memory_units_beyond_origin';
    EXECUTE format('CREATE POLICY owner_maintenance ON memory_units_beyond_origin TO %I USING (true) WITH CHECK (true)',
                   (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'memory_units_beyond_origin'::regclass));
END $$;
DROP POLICY IF EXISTS read_scope ON memory_units_beyond_origin;
CREATE POLICY read_scope ON memory_units_beyond_origin FOR SELECT TO memory_app
    USING (project = ANY ((SELECT memory_scope('read'))::text[])
           AND EXISTS (SELECT 1 FROM memory_units u WHERE u.id = unit_id));  -- the units' own policy: no private
                                                                             -- unit of another persona shows
DROP POLICY IF EXISTS analyst_read ON memory_units_beyond_origin;
CREATE POLICY analyst_read ON memory_units_beyond_origin FOR SELECT TO memory_reader USING (true);

-- The units sql/024's triggers marked keep reading their sources through their column, as they do today.

-- sql/016's audience trigger again (its probe of the added units by id included), with the mark: one statement,
-- the units read once; only a still-private unit's row is updated, as before sql/024, its private_to tested on the
-- row itself (a concurrent change of it is re-checked there, not on the CTE's copy). Both triggers run as the owner,
-- like the journal's: a writer whose row-level security hides the unit (write scope without read, another
-- persona's private unit) still marks it and widens its audience.
CREATE OR REPLACE FUNCTION memory_sources_audience() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    WITH a AS (
        SELECT unit_id, bool_or(visibility = 'project') AS shared,
               coalesce(array_agg(persona) FILTER (WHERE visibility = 'private' AND persona IS NOT NULL), '{}')
                   AS personas,
               min(inbox_id) AS inbox_id,  -- with the flag below: every source added is the one row
               min(inbox_id) IS DISTINCT FROM max(inbox_id) OR count(inbox_id) < count(*) AS other_than_one_row
        FROM added GROUP BY unit_id
    ), touched AS (
        SELECT u.id, u.project, a.shared, a.personas,
               NOT u.sources_beyond_origin AND (a.other_than_one_row OR a.inbox_id IS DISTINCT FROM u.origin_inbox_id)
                   AS beyond
        FROM memory_units u JOIN a ON a.unit_id = u.id
        WHERE u.id = ANY (ARRAY(SELECT DISTINCT unit_id FROM added))
    ), marked AS (
        INSERT INTO memory_units_beyond_origin (unit_id, project)
        SELECT id, project FROM touched WHERE beyond
        ON CONFLICT (unit_id) DO NOTHING
    )
    UPDATE memory_units u
    SET private_to = CASE WHEN t.shared THEN NULL
                          ELSE ARRAY(SELECT DISTINCT p FROM unnest(u.private_to || t.personas) AS p ORDER BY p) END
    FROM touched t
    WHERE u.id = t.id AND u.private_to IS NOT NULL;
    RETURN NULL;
END $$;

-- A source changed (moved to another unit included) or deleted (forget, a merge's copies dropped): the units on
-- either side that were born with their origin alone read their sources from then on. One statement over the
-- sources before (a delete, an update) or after (an update) the change: an update fires it for each side.
CREATE OR REPLACE FUNCTION memory_sources_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    INSERT INTO memory_units_beyond_origin (unit_id, project)
    SELECT u.id, u.project FROM memory_units u
    WHERE u.id IN (SELECT unit_id FROM changed) AND NOT u.sources_beyond_origin
    ON CONFLICT (unit_id) DO NOTHING;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS memory_sources_updated ON memory_sources;
DROP TRIGGER IF EXISTS memory_sources_updated_from ON memory_sources;
CREATE TRIGGER memory_sources_updated_from AFTER UPDATE ON memory_sources REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION memory_sources_changed();
DROP TRIGGER IF EXISTS memory_sources_updated_to ON memory_sources;
CREATE TRIGGER memory_sources_updated_to AFTER UPDATE ON memory_sources REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION memory_sources_changed();
