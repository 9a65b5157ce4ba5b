-- sql/025's audience trigger ran its one statement for every insert of sources, whatever they were: a CTE holding
-- an INSERT into the marks and an UPDATE of memory_units, which opens every index of both tables (eight on the
-- units) even when it changes no row. Almost every source inserted is the one row a unit was just folded from, into
-- a shared unit: nothing to mark, no audience to widen. remember()'s one-row fold paid ~40 us of its ~450 us on the
-- server for nothing (docs/scaling.md item 21). The trigger now first reads whether any added source needs it, and
-- returns when none does. The test is per source and exact, not a guess: a unit is marked when one of its added
-- sources has no inbox row or another inbox row than the unit's origin (two added rows of one unit from different
-- inbox rows differ from the origin in at least one; sql/025's per-unit min/max/count says the same), and its
-- audience is touched only while it is private. Run as the owner, with the temporary schema searched last (sql/027).
CREATE OR REPLACE FUNCTION memory_sources_audience() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM added a JOIN memory_units u ON u.id = a.unit_id
        WHERE u.private_to IS NOT NULL
           OR (NOT u.sources_beyond_origin AND (a.inbox_id IS NULL OR a.inbox_id IS DISTINCT FROM u.origin_inbox_id))
    ) THEN
        RETURN NULL;
    END IF;
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
