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
-- sql/functions/memory_fold.sql sha256 6fd5833d55a568c7c9d04907a62094108dfef7bf3a2caf36d70a61e4667edc22
-- sql/functions/memory_last_number.sql sha256 12da2acc8a2ffffead55076292cc6acaa54c98db5e6f44503e014adab63f91fe
-- sql/functions/memory_remember_gated.sql sha256 c732849452e6feb17005350e3213f69b4290cd16843aecef49cf61cf8b14f4a8
CREATE OR REPLACE FUNCTION memory_units_keep_numbers() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN  -- before it: the numbers are still there to read
        UPDATE memory_projects p SET last_number = n.top
        FROM (SELECT u.project, max(u.number) AS top FROM memory_units u GROUP BY u.project) n
        WHERE p.project = n.project AND p.last_number < n.top;
    ELSE
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
