-- Invariant 5 for the daily decay scores and read-rate metrics: a past day re-run must see the votes and the A/B
-- arms that day saw. memory_votes and memory_task_arms hold each task's current vote and arm, overwritten when they
-- change, so a trigger on each appends their changes here, with their time, whoever writes them (every vote cast or
-- changed; an arm as the table below says). Neither is ever deleted: a task changes its vote or its arm, and a
-- forgotten unit keeps its votes.

-- Every vote a task cast or changed on a unit.
CREATE TABLE IF NOT EXISTS memory_vote_history (
    seq      bigserial PRIMARY KEY,
    unit_id  uuid NOT NULL REFERENCES memory_units (id),
    project  text NOT NULL,
    task_id  text NOT NULL,
    vote     smallint NOT NULL CHECK (vote IN (-1, 1)),
    at       timestamptz NOT NULL DEFAULT now()
);

-- Every memory decision recorded for a task that differs from the task's previous one, and the first of each UTC
-- day (a prompt block records one per call), so each task's arm at a day's end and a day's active tasks stay known.
CREATE TABLE IF NOT EXISTS memory_task_arm_history (
    seq        bigserial PRIMARY KEY,
    task_id    text NOT NULL,
    epic_id    text,
    value      text NOT NULL CHECK (value IN ('on', 'off')),
    source     text NOT NULL CHECK (source IN ('task', 'epic', 'default', 'killed', 'holdout')),
    decided_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS memory_task_arm_history_task ON memory_task_arm_history (task_id, seq);
CREATE INDEX IF NOT EXISTS memory_task_arm_history_day ON memory_task_arm_history (decided_at);

-- A vote's change is dated by the transaction that made it (an update that leaves `at` as it was is still a change
-- now); an update that keeps the vote is none.
CREATE OR REPLACE FUNCTION memory_votes_history() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
    IF TG_OP = 'INSERT' OR OLD.vote IS DISTINCT FROM NEW.vote THEN
        INSERT INTO memory_vote_history (unit_id, project, task_id, vote, at)
        VALUES (NEW.unit_id, NEW.project, NEW.task_id, NEW.vote,
                CASE WHEN TG_OP = 'INSERT' THEN NEW.at ELSE greatest(NEW.at, now()) END);
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS memory_votes_history ON memory_votes;
CREATE TRIGGER memory_votes_history AFTER INSERT OR UPDATE ON memory_votes
    FOR EACH ROW EXECUTE FUNCTION memory_votes_history();

CREATE OR REPLACE FUNCTION memory_task_arms_history() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
    INSERT INTO memory_task_arm_history (task_id, epic_id, value, source, decided_at)
    SELECT NEW.task_id, NEW.epic_id, NEW.value, NEW.source, NEW.decided_at
    WHERE NOT EXISTS (
        SELECT 1
        FROM (SELECT h.epic_id, h.value, h.source, h.decided_at FROM memory_task_arm_history h
              WHERE h.task_id = NEW.task_id ORDER BY h.seq DESC LIMIT 1) latest
        WHERE (latest.epic_id, latest.value, latest.source) IS NOT DISTINCT FROM (NEW.epic_id, NEW.value, NEW.source)
          AND (latest.decided_at AT TIME ZONE 'UTC')::date = (NEW.decided_at AT TIME ZONE 'UTC')::date);
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS memory_task_arms_history ON memory_task_arms;
CREATE TRIGGER memory_task_arms_history AFTER INSERT OR UPDATE ON memory_task_arms
    FOR EACH ROW EXECUTE FUNCTION memory_task_arms_history();

-- What is known before this migration: each current vote, and each task's current arm dated back to its first
-- event (every call re-dated the arm, and the read-rate statements joined each event to it, whenever sent).
INSERT INTO memory_vote_history (unit_id, project, task_id, vote, at)
SELECT v.unit_id, v.project, v.task_id, v.vote, v.at
FROM memory_votes v
WHERE NOT EXISTS (SELECT 1 FROM memory_vote_history h WHERE h.unit_id = v.unit_id AND h.task_id = v.task_id);
INSERT INTO memory_task_arm_history (task_id, epic_id, value, source, decided_at)
SELECT a.task_id, a.epic_id, a.value, a.source,
       least(a.decided_at, (SELECT min(e.at) FROM memory_events e WHERE e.task_id = a.task_id))
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
