-- A write no longer updates its project's counter row. Every remember() and every fold set memory_projects.
-- last_number, a new version of one row per write; while any snapshot older than those versions lived (a pg_dump, a
-- long analytics query, a session idle in a transaction), none could be pruned, and every later write and recall
-- walked them all: after 4,000 writes under an open transaction one read of the row took 110 us (31 buffers), and
-- remember()'s server CPU grew from 579 to 1,207 us a call over 6,400 writes into one project (docs/scaling.md item
-- 56). The writes still lock the row to commit (FOR UPDATE, which marks the row in place: no new version), so folds
-- of a project serialise and numbers stay gap-free; the next number is memory_last_number(project) + 1
-- (sql/functions/memory_last_number.sql): the highest number the project's units hold, or last_number where that is
-- higher, read under the lock, in a statement after it, so every unit committed before is seen. last_number now
-- keeps only the numbers of deleted units: the trigger below raises it to the highest a DELETE or a TRUNCATE of the
-- units took, so no number, cited as mem-<n>, is ever given to another unit. Recall and curation read a project's
-- size through the same function.
--
-- An attacker's pass over this migration's first draft found, each closed before it shipped: a DELETE across
-- projects raised their counter rows in the join's order while the folds lock them in name order (75 of ~890 writes
-- beside deletes of two projects at once failed with a deadlock), so the trigger locks them in name order first;
-- under session_replication_role = replica (a logical replica's apply, a restore script) the triggers did not fire,
-- so they fire ALWAYS; an UPDATE of a unit's project or number left its old number free, so a row trigger on those
-- two columns (which no write of this package changes) keeps it; and memory_last_number, which runs as the owner,
-- was anyone's to call, so EXECUTE is memory_app's alone (recall runs as that role; the owner's writes need none). It
-- is created here for those grants, which the CREATE OR REPLACE of its file, applied after this migration, keeps. A
-- TRUNCATE of the units takes their table's lock before its trigger waits for a counter row a writer holds while
-- that writer reads the units: run it with the writers stopped, as any TRUNCATE of the ledger is.
--
-- sql/functions/memory_fold.sql sha256 6ac2b87b13e60eba0da99fb10f3ffeb2df2f373b285a7557d2d6130bfcdd773a
-- sql/functions/memory_last_number.sql sha256 12da2acc8a2ffffead55076292cc6acaa54c98db5e6f44503e014adab63f91fe
-- sql/functions/memory_remember_gated.sql sha256 c732849452e6feb17005350e3213f69b4290cd16843aecef49cf61cf8b14f4a8
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

DROP TRIGGER IF EXISTS memory_units_keep_deleted_numbers ON memory_units;
CREATE TRIGGER memory_units_keep_deleted_numbers AFTER DELETE ON memory_units
    REFERENCING OLD TABLE AS deleted_units FOR EACH STATEMENT EXECUTE FUNCTION memory_units_keep_numbers();
DROP TRIGGER IF EXISTS memory_units_keep_truncated_numbers ON memory_units;
CREATE TRIGGER memory_units_keep_truncated_numbers BEFORE TRUNCATE ON memory_units
    FOR EACH STATEMENT EXECUTE FUNCTION memory_units_keep_numbers();
DROP TRIGGER IF EXISTS memory_units_keep_moved_numbers ON memory_units;
CREATE TRIGGER memory_units_keep_moved_numbers AFTER UPDATE OF project, number ON memory_units
    FOR EACH ROW WHEN (OLD.project IS DISTINCT FROM NEW.project OR OLD.number IS DISTINCT FROM NEW.number)
    EXECUTE FUNCTION memory_units_keep_numbers();
ALTER TABLE memory_units ENABLE ALWAYS TRIGGER memory_units_keep_deleted_numbers;
ALTER TABLE memory_units ENABLE ALWAYS TRIGGER memory_units_keep_truncated_numbers;
ALTER TABLE memory_units ENABLE ALWAYS TRIGGER memory_units_keep_moved_numbers;
