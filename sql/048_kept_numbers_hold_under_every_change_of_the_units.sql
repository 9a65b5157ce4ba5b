-- An attacker's pass over sql/047 found, each closed here:
-- 1. memory_units_keep_numbers raised the counter rows of a DELETE across projects in the join's order, while the
--    folds lock them in name order: 75 of ~890 writes beside deletes of two projects at once failed with a
--    deadlock. It now locks them in name order first. (A TRUNCATE of the units still takes their table's lock before
--    its trigger waits for a counter row a writer holds, while that writer reads the units: run it with the writers
--    stopped, as any TRUNCATE of the ledger is.)
-- 2. Under session_replication_role = replica (a logical replica's apply, a restore script) neither trigger fired,
--    and a deleted top unit's number was given again: both fire ALWAYS now.
-- 3. An UPDATE of a unit's project or number left its old number free in its old project: a row trigger on those two
--    columns (which no write of this package changes) keeps it.
-- 4. memory_last_number runs as the owner and any role could call it, learning a project's size outside its read
--    scope: EXECUTE is memory_app's alone (recall runs as that role; the owner's writes need no grant). It is created
--    here for its grants, which the CREATE OR REPLACE of sql/functions/memory_last_number.sql, applied after this
--    migration, keeps.
--
-- sql/functions/memory_last_number.sql sha256 12da2acc8a2ffffead55076292cc6acaa54c98db5e6f44503e014adab63f91fe
CREATE OR REPLACE FUNCTION memory_last_number(of_project text) RETURNS bigint
LANGUAGE sql STABLE AS $$ SELECT NULL::bigint $$;
REVOKE ALL ON FUNCTION memory_last_number(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memory_last_number(text) TO memory_app;

CREATE OR REPLACE FUNCTION memory_units_keep_numbers() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN  -- a row moved to another project or number: its old number stays taken
        UPDATE memory_projects p SET last_number = OLD.number
        WHERE p.project = OLD.project AND p.last_number < OLD.number;
        RETURN NULL;
    END IF;
    IF TG_OP = 'TRUNCATE' THEN  -- before it: the numbers are still there to read
        PERFORM 1 FROM memory_projects p ORDER BY p.project FOR UPDATE;
        UPDATE memory_projects p SET last_number = n.top
        FROM (SELECT u.project, max(u.number) AS top FROM memory_units u GROUP BY u.project) n
        WHERE p.project = n.project AND p.last_number < n.top;
    ELSE  -- the counter rows locked in name order, as the folds lock them
        PERFORM 1 FROM memory_projects p WHERE p.project IN (SELECT d.project FROM deleted_units d)
        ORDER BY p.project FOR UPDATE;
        UPDATE memory_projects p SET last_number = n.top
        FROM (SELECT d.project, max(d.number) AS top FROM deleted_units d GROUP BY d.project) n
        WHERE p.project = n.project AND p.last_number < n.top;
    END IF;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS memory_units_keep_moved_numbers ON memory_units;
CREATE TRIGGER memory_units_keep_moved_numbers AFTER UPDATE OF project, number ON memory_units
    FOR EACH ROW WHEN (OLD.project IS DISTINCT FROM NEW.project OR OLD.number IS DISTINCT FROM NEW.number)
    EXECUTE FUNCTION memory_units_keep_numbers();
ALTER TABLE memory_units ENABLE ALWAYS TRIGGER memory_units_keep_deleted_numbers;
ALTER TABLE memory_units ENABLE ALWAYS TRIGGER memory_units_keep_truncated_numbers;
ALTER TABLE memory_units ENABLE ALWAYS TRIGGER memory_units_keep_moved_numbers;
