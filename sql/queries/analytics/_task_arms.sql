-- Fragment: each task's memory decision (task_id, value, source) at %(end)s: its latest recorded before then in the
-- arm history, so a re-run of a past day after the task's arm changed puts the task where the day put it, and both
-- read-rate tables count a task, its injections and its reads in one arm.
SELECT DISTINCT ON (h.task_id) h.task_id, h.value, h.source
FROM memory_task_arm_history h
WHERE h.decided_at < %(end)s
ORDER BY h.task_id, h.seq DESC
