-- Per-arm task counts of every window end (or only day %(day)s when it is not NULL), oldest first, for the arm
-- comparison.
SELECT day, arm, source, window_days, tasks, injected_tasks, used_tasks
FROM read_rate_arms
WHERE %(day)s::date IS NULL OR day = %(day)s::date
ORDER BY day, arm, source;
