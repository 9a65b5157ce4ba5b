-- The change journal's row trigger for updates and deletes (inserts are journaled per statement: sql/021): a row
-- for each unit whose revision or status changed, or that was deleted, with the status it replaced (sql/044), so a
-- unit's status at any time is its first later change's prior status. Its history: sql/002, sql/004 and sql/027
-- (its search path: pg_catalog, then public, then the temporary schema, so no caller's object stands in for a table).
CREATE OR REPLACE FUNCTION memory_units_journal() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO memory_changes (unit_id, project, revision, status, change, prior_status)
        VALUES (OLD.id, OLD.project, OLD.revision, OLD.status, 'delete', OLD.status);
        RETURN OLD;
    ELSIF (NEW.revision, NEW.status) IS DISTINCT FROM (OLD.revision, OLD.status) THEN
        INSERT INTO memory_changes (unit_id, project, revision, status, change, prior_status)
        VALUES (NEW.id, NEW.project, NEW.revision, NEW.status, 'update', OLD.status);
    END IF;
    RETURN NEW;
END $$;
