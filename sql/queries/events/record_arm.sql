-- Record a task's memory decision (its A/B arm) and why, replacing an earlier decision for the task (a trigger keeps
-- its history, sql/039).
INSERT INTO memory_task_arms (task_id, epic_id, value, source)
VALUES (%(task_id)s, %(epic_id)s, %(value)s, %(source)s)
ON CONFLICT (task_id) DO UPDATE
SET epic_id = EXCLUDED.epic_id, value = EXCLUDED.value, source = EXCLUDED.source, decided_at = now();
