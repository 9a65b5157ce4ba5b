-- Votes and A/B arms are never deleted (sql/039): a task changes its vote or its arm, and a forgotten unit keeps its
-- votes. A past day's decay and read rate re-run from the histories that triggers append on every insert and
-- update, which a DELETE passes by: a vote deleted by hand would still count in its history, the current table
-- saying otherwise. A row's DELETE from either table or either history is now refused, as an update or a delete of
-- the audit log is (sql/001). TRUNCATE, the owner's reset of a whole store, changes no row of a day and stays allowed.
CREATE OR REPLACE FUNCTION memory_rows_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% keeps every row: a vote or an arm is changed, never deleted', TG_TABLE_NAME;
END $$;

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['memory_votes', 'memory_task_arms', 'memory_vote_history', 'memory_task_arm_history'] LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS %I ON %I', t || '_kept', t);
        EXECUTE format('CREATE TRIGGER %I BEFORE DELETE ON %I FOR EACH ROW EXECUTE FUNCTION memory_rows_kept()',
                       t || '_kept', t);
    END LOOP;
END $$;
