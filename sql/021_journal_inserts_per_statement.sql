-- The change journal records a statement's inserted units in one INSERT from its transition table: the row trigger
-- ran a plpgsql call (security definer, with its own search_path) per unit, 11.5 of the fold's ~106 us a unit in a
-- 1,000-row batch (EXPLAIN ANALYZE, docs/scaling.md). Updates and deletes keep the row trigger: it records only the
-- rows whose revision or status changed, and an update of many units (decay, curation) holds no transition table.
CREATE OR REPLACE FUNCTION memory_units_journal_inserts() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public
AS $$
BEGIN
    INSERT INTO memory_changes (unit_id, project, revision, status, change)
    SELECT id, project, revision, status, 'insert' FROM inserted_units;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS memory_units_journal_inserts ON memory_units;
CREATE TRIGGER memory_units_journal_inserts AFTER INSERT ON memory_units
    REFERENCING NEW TABLE AS inserted_units
    FOR EACH STATEMENT EXECUTE FUNCTION memory_units_journal_inserts();
DROP TRIGGER IF EXISTS memory_units_journal ON memory_units;
CREATE TRIGGER memory_units_journal AFTER UPDATE OR DELETE ON memory_units
    FOR EACH ROW EXECUTE FUNCTION memory_units_journal();
