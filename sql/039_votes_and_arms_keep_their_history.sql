-- Invariant 5 for the daily decay scores and read-rate metrics: a past day re-run must see the votes and the A/B
-- arms that day saw. memory_votes and memory_task_arms hold each task's current vote and arm, overwritten when they
-- change, so each change is also appended here, with its time.

-- Every vote a task cast or changed on a unit (cast_vote.sql appends in the same statement).
CREATE TABLE IF NOT EXISTS memory_vote_history (
    seq      bigserial PRIMARY KEY,
    unit_id  uuid NOT NULL REFERENCES memory_units (id),
    project  text NOT NULL,
    task_id  text NOT NULL,
    vote     smallint NOT NULL CHECK (vote IN (-1, 1)),
    at       timestamptz NOT NULL DEFAULT now()
);

-- Every memory decision recorded for a task when it differs from the task's previous one, and the first of each UTC
-- day (record_arm.sql), so a day's activity and each event's arm in effect stay known for good.
CREATE TABLE IF NOT EXISTS memory_task_arm_history (
    seq        bigserial PRIMARY KEY,
    task_id    text NOT NULL,
    epic_id    text,
    value      text NOT NULL CHECK (value IN ('on', 'off')),
    source     text NOT NULL CHECK (source IN ('task', 'epic', 'default', 'killed', 'holdout')),
    decided_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS memory_task_arm_history_task ON memory_task_arm_history (task_id, decided_at);
CREATE INDEX IF NOT EXISTS memory_task_arm_history_day ON memory_task_arm_history (decided_at);

-- The current votes and arms are the history known before this migration (earlier changes were overwritten).
INSERT INTO memory_vote_history (unit_id, project, task_id, vote, at)
SELECT v.unit_id, v.project, v.task_id, v.vote, v.at
FROM memory_votes v
WHERE NOT EXISTS (SELECT 1 FROM memory_vote_history h WHERE h.unit_id = v.unit_id AND h.task_id = v.task_id);
INSERT INTO memory_task_arm_history (task_id, epic_id, value, source, decided_at)
SELECT a.task_id, a.epic_id, a.value, a.source, a.decided_at
FROM memory_task_arms a
WHERE NOT EXISTS (SELECT 1 FROM memory_task_arm_history h WHERE h.task_id = a.task_id);

-- Like every memory table (sql/009): row-level security forced, the owner through its own policy, the analysts
-- reading every row (task ids and votes, as they read memory_votes and memory_task_arms).
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['memory_vote_history', 'memory_task_arm_history'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('DROP POLICY IF EXISTS owner_maintenance ON %I', t);
        EXECUTE format('CREATE POLICY owner_maintenance ON %I TO %I USING (true) WITH CHECK (true)', t,
                       (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = t::regclass));
        EXECUTE format('GRANT SELECT ON %I TO memory_reader', t);
        EXECUTE format('DROP POLICY IF EXISTS analyst_read ON %I', t);
        EXECUTE format('CREATE POLICY analyst_read ON %I FOR SELECT TO memory_reader USING (true)', t);
    END LOOP;
END $$;
