-- memory_units' rules (sql/001's fourteen CHECK constraints), compiled once per session instead of read anew for every
-- statement that writes a unit. PostgreSQL keeps a table's CHECK expressions as stored node trees and parses each one
-- again whenever an INSERT or UPDATE starts: ~13 kB of text for these fourteen, ~48 of the ~185 us remember() spent
-- inserting its unit (timed inside the server; perf put the parse at a tenth of the backend's CPU). One CHECK now
-- calls a PL/pgSQL function that holds the same rules: a session compiles its body once, as sql/034 did for the
-- full-text functions. A row that breaks a rule is refused as before (check_violation), with the rule it breaks in
-- the message and none of the row's text (PostgreSQL's own message for a CHECK carries the failing row).
CREATE OR REPLACE FUNCTION memory_unit_rules_hold(number bigint, type text, kind text, title text, body text,
                                                  status text, confidence real, importance real, trust real,
                                                  confirms integer, flags integer, revision integer,
                                                  valid_from timestamptz, valid_until timestamptz)
RETURNS boolean LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    -- as a CHECK reads a rule: it holds unless it is false (a NULL passes); every function and operator is named with
    -- its schema, as the CHECKs stored them resolved, so no schema ahead of pg_catalog on a session's search_path can
    -- stand in for one (a SET search_path clause instead cost each insert ~6 us more)
    broken text := CASE
        WHEN NOT number OPERATOR(pg_catalog.>) 0 THEN 'number > 0'
        WHEN NOT type OPERATOR(pg_catalog.=) ANY (ARRAY['episodic', 'semantic', 'procedural'])
            THEN 'type in (episodic, semantic, procedural)'
        WHEN NOT kind OPERATOR(pg_catalog.=) ANY (ARRAY['codemap', 'gotcha', 'recipe', 'env', 'qa', 'note'])
            THEN 'kind in (codemap, gotcha, recipe, env, qa, note)'
        WHEN NOT pg_catalog.char_length(title) OPERATOR(pg_catalog.<=) 80 THEN 'title at most 80 characters'
        WHEN NOT pg_catalog.char_length(body) OPERATOR(pg_catalog.<=) 1200 THEN 'body at most 1200 characters'
        WHEN NOT status OPERATOR(pg_catalog.=) ANY (ARRAY['proposed', 'review', 'active', 'flagged', 'stale',
                                                          'superseded', 'retired', 'forgotten'])
            THEN 'status in (proposed, review, active, flagged, stale, superseded, retired, forgotten)'
        WHEN NOT (confidence OPERATOR(pg_catalog.>=) 0 AND confidence OPERATOR(pg_catalog.<=) 1)
            THEN 'confidence between 0 and 1'
        WHEN NOT (importance OPERATOR(pg_catalog.>=) 0 AND importance OPERATOR(pg_catalog.<=) 1)
            THEN 'importance between 0 and 1'
        WHEN NOT (trust OPERATOR(pg_catalog.>=) 0 AND trust OPERATOR(pg_catalog.<=) 1) THEN 'trust between 0 and 1'
        WHEN NOT confirms OPERATOR(pg_catalog.>=) 0 THEN 'confirms >= 0'
        WHEN NOT flags OPERATOR(pg_catalog.>=) 0 THEN 'flags >= 0'
        WHEN NOT revision OPERATOR(pg_catalog.>=) 1 THEN 'revision >= 1'
        -- only a forgotten tombstone may be blank
        WHEN NOT (status OPERATOR(pg_catalog.=) 'forgotten'
                  OR (pg_catalog.btrim(title) OPERATOR(pg_catalog.<>) ''
                      AND pg_catalog.btrim(body) OPERATOR(pg_catalog.<>) ''))
            THEN 'title and body not blank unless forgotten'
        WHEN NOT (valid_until IS NULL OR valid_until OPERATOR(pg_catalog.>=) valid_from)
            THEN 'valid_until >= valid_from'
    END;
BEGIN
    IF broken IS NULL THEN
        RETURN true;
    END IF;
    RAISE EXCEPTION 'new row for relation "memory_units" breaks its rule: %', broken
        USING ERRCODE = 'check_violation', TABLE = 'memory_units', CONSTRAINT = 'memory_units_rules';
END $$;

-- every CHECK of memory_units goes: sql/001's fourteen are all that migrations give it (their names were generated)
DO $$
DECLARE
    rule record;
BEGIN
    FOR rule IN SELECT conname FROM pg_constraint WHERE conrelid = 'memory_units'::regclass AND contype = 'c' LOOP
        EXECUTE format('ALTER TABLE memory_units DROP CONSTRAINT %I', rule.conname);
    END LOOP;
END $$;

ALTER TABLE memory_units ADD CONSTRAINT memory_units_rules CHECK (memory_unit_rules_hold(
    number, type, kind, title, body, status, confidence, importance, trust, confirms, flags, revision, valid_from,
    valid_until));
