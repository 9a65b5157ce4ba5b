-- The projects with episodes created in [%(start)s, %(end)s).
SELECT DISTINCT project
FROM memory_units
WHERE type = 'episodic' AND created_at >= %(start)s::timestamptz AND created_at < %(end)s::timestamptz;
