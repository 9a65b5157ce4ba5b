-- Read-rate metrics of one day per (project, kind, unit, arm): event counts of the day, and the kill flag from the
-- trailing window (injected often, rarely read). Each task counts in its arm at the day's end (analytics/_task_arms).
WITH window_events AS (
    SELECT e.unit_id, coalesce(a.value, 'unassigned') AS arm, e.kind, e.task_id, e.at
    FROM memory_events e
    LEFT JOIN ({analytics/_task_arms}) a ON a.task_id = e.task_id
    WHERE e.at >= %(window_start)s AND e.at < %(end)s AND NOT e.provisional
), day_events AS (
    SELECT unit_id, arm, kind, task_id FROM window_events WHERE at >= %(start)s
), window_usage AS (
    SELECT unit_id, arm,
           count(DISTINCT task_id) FILTER (WHERE kind = 'injected') AS injected_tasks,
           count(DISTINCT task_id) FILTER (WHERE kind <> 'injected') AS used_tasks
    FROM window_events
    GROUP BY 1, 2
)
INSERT INTO read_rate_metrics (day, project, kind, unit_id, arm, injections, reads, citations, follows, read_rate, kill)
SELECT %(day)s, u.project, u.kind, d.unit_id, d.arm,
       count(*) FILTER (WHERE d.kind = 'injected'),
       count(*) FILTER (WHERE d.kind = 'read'),
       count(*) FILTER (WHERE d.kind = 'cited'),
       count(*) FILTER (WHERE d.kind = 'followed'),
       count(DISTINCT d.task_id) FILTER (WHERE d.kind <> 'injected')::double precision
           / nullif(count(DISTINCT d.task_id) FILTER (WHERE d.kind = 'injected'), 0),
       coalesce(bool_or(w.injected_tasks >= %(min_injections)s
                        AND w.used_tasks::double precision / w.injected_tasks < %(max_read_rate)s), false)
FROM day_events d JOIN memory_units u ON u.id = d.unit_id
LEFT JOIN window_usage w ON w.unit_id = d.unit_id AND w.arm = d.arm
GROUP BY u.project, u.kind, d.unit_id, d.arm;
