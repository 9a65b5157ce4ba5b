-- Per-arm task counts of the trailing window ending with day %(day)s: tasks with a memory decision recorded or any
-- usage event in [%(window_start)s, %(end)s), each in its arm (value, source) at the window's end
-- (analytics/_task_arms), and of those the tasks memory was injected into and the tasks that read, cited or followed
-- a unit.
WITH window_tasks AS (
    SELECT task_id FROM memory_task_arm_history WHERE decided_at >= %(window_start)s AND decided_at < %(end)s
    UNION
    SELECT task_id FROM memory_events WHERE at >= %(window_start)s AND at < %(end)s AND NOT provisional
), usage AS (
    SELECT task_id, bool_or(kind = 'injected') AS injected, bool_or(kind <> 'injected') AS used
    FROM memory_events
    WHERE at >= %(window_start)s AND at < %(end)s AND NOT provisional
    GROUP BY task_id
)
INSERT INTO read_rate_arms (day, arm, source, window_days, tasks, injected_tasks, used_tasks)
SELECT %(day)s::date, a.value, a.source, %(window_days)s::integer, count(*),
       count(*) FILTER (WHERE u.injected), count(*) FILTER (WHERE u.used)
FROM window_tasks w
JOIN ({analytics/_task_arms}) a ON a.task_id = w.task_id
LEFT JOIN usage u ON u.task_id = w.task_id
GROUP BY a.value, a.source;
