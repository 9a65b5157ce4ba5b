-- Private contributions. Each candidate's visibility travels through the inbox to its source, and every unit keeps
-- its audience in private_to: NULL when any of its sources is project-visible (every reader of the project), else
-- the personas of its private sources. Recall filters on this column, a cheap predicate the planner estimates
-- well; a per-unit subquery over sources made it trade the index joins of the vector search for sequential scans.
ALTER TABLE memory_inbox ADD COLUMN IF NOT EXISTS visibility text NOT NULL DEFAULT 'project'
    CHECK (visibility IN ('project', 'private'));
ALTER TABLE memory_units ADD COLUMN IF NOT EXISTS private_to text[];
CREATE INDEX IF NOT EXISTS memory_units_private ON memory_units (id) WHERE private_to IS NOT NULL;
CREATE INDEX IF NOT EXISTS memory_sources_private ON memory_sources (unit_id) WHERE visibility = 'private';

-- A unit's audience as its sources say (sorted personas; NULL when a source is project-visible or there is none):
-- the backfill below and the data-quality check both read it.
CREATE OR REPLACE FUNCTION memory_unit_audience(unit uuid) RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN count(*) = 0 OR bool_or(visibility = 'project') THEN NULL
                ELSE coalesce(array_agg(DISTINCT persona ORDER BY persona) FILTER (WHERE persona IS NOT NULL), '{}') END
    FROM memory_sources WHERE unit_id = unit
$$;
UPDATE memory_units u SET private_to = memory_unit_audience(u.id)
WHERE EXISTS (SELECT 1 FROM memory_sources s WHERE s.unit_id = u.id AND s.visibility = 'private');

-- A unit is born with the audience of the inbox row that created it (fold_inbox.sql); every source added later
-- widens it: a project-visible one opens the unit to every reader, a private one adds its persona.
CREATE OR REPLACE FUNCTION memory_sources_audience() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_units u
    SET private_to = CASE WHEN a.shared THEN NULL
                          ELSE ARRAY(SELECT DISTINCT p FROM unnest(u.private_to || a.personas) AS p ORDER BY p) END
    FROM (SELECT unit_id, bool_or(visibility = 'project') AS shared,
                 coalesce(array_agg(persona) FILTER (WHERE visibility = 'private' AND persona IS NOT NULL), '{}')
                     AS personas
          FROM added GROUP BY unit_id) AS a
    WHERE u.id = a.unit_id AND u.private_to IS NOT NULL;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS memory_sources_audience ON memory_sources;
CREATE TRIGGER memory_sources_audience AFTER INSERT ON memory_sources REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION memory_sources_audience();
