-- Record a task's memory decision (its A/B arm) and why, replacing an earlier decision for the task; append it to
-- the arm history when it differs from the task's latest there or is the task's first of the UTC day, so a past
-- day's read-rate metrics re-run with the arms that day saw (analytics/read_rate_day.sql).
WITH decided AS (
    INSERT INTO memory_task_arms (task_id, epic_id, value, source)
    VALUES (%(task_id)s, %(epic_id)s, %(value)s, %(source)s)
    ON CONFLICT (task_id) DO UPDATE
    SET epic_id = EXCLUDED.epic_id, value = EXCLUDED.value, source = EXCLUDED.source, decided_at = now()
    RETURNING task_id, epic_id, value, source, decided_at
)
INSERT INTO memory_task_arm_history (task_id, epic_id, value, source, decided_at)
SELECT d.task_id, d.epic_id, d.value, d.source, d.decided_at
FROM decided d
WHERE NOT EXISTS (
    SELECT 1
    FROM (SELECT h.epic_id, h.value, h.source, h.decided_at FROM memory_task_arm_history h
          WHERE h.task_id = d.task_id ORDER BY h.decided_at DESC, h.seq DESC LIMIT 1) latest
    WHERE (latest.epic_id, latest.value, latest.source) IS NOT DISTINCT FROM (d.epic_id, d.value, d.source)
      AND (latest.decided_at AT TIME ZONE 'UTC')::date = (d.decided_at AT TIME ZONE 'UTC')::date);
