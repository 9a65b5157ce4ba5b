-- Read-rate metrics of one day per (project, kind, unit, arm): event counts of the day, and the kill flag from the
-- trailing window (injected often, rarely read). Each event counts in the arm in effect when it was sent: its task's
-- latest decision at or before it, else its first (an event sent before the task's first decision), of those
-- recorded before the day's end, so a re-run after the task's arm changed gives the same rows. Each decision holds
-- from its time to the task's next one (the first from the start), so every event joins one by a hash on the task.
WITH events AS (
    SELECT e.unit_id, e.kind, e.task_id, e.at
    FROM memory_events e
    WHERE e.at >= %(window_start)s AND e.at < %(end)s AND NOT e.provisional
), arms AS (
    SELECT h.task_id, h.value,
           CASE WHEN row_number() OVER w = 1 THEN '-infinity' ELSE h.decided_at END AS since,
           coalesce(lead(h.decided_at) OVER w, 'infinity') AS until
    FROM memory_task_arm_history h
    WHERE h.decided_at < %(end)s AND h.task_id IN (SELECT task_id FROM events)
    WINDOW w AS (PARTITION BY h.task_id ORDER BY h.decided_at, h.seq)
), window_events AS (
    SELECT e.unit_id, coalesce(a.value, 'unassigned') AS arm, e.kind, e.task_id, e.at
    FROM events e
    LEFT JOIN arms a ON a.task_id = e.task_id AND e.at >= a.since AND e.at < a.until
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
