-- A contribution without a task id is a source of its own. memory_sources was unique per (unit, task) with NULLS NOT
-- DISTINCT, so every task-less contribution after the first was dropped (its persona, session and the audience it
-- widens to were lost). Task ids stay one source per unit and task; task-less rows are told apart upstream by the
-- inbox's idempotency key (feed, session, persona and visibility when there is no task), so a replay still adds none.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_constraint
               WHERE conrelid = 'memory_sources'::regclass AND conname = 'memory_sources_unit_id_task_id_key'
                 AND pg_get_constraintdef(oid) LIKE '%NULLS NOT DISTINCT%') THEN
        ALTER TABLE memory_sources DROP CONSTRAINT memory_sources_unit_id_task_id_key;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'memory_sources'::regclass AND conname = 'memory_sources_unit_id_task_id_key') THEN
        ALTER TABLE memory_sources ADD CONSTRAINT memory_sources_unit_id_task_id_key UNIQUE (unit_id, task_id);
    END IF;
END $$;
