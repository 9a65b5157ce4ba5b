-- Units flagged for the kill list (injected often, rarely read), each as of its latest metrics day, for project
-- %(p)s or all projects when it is NULL.
SELECT DISTINCT ON (m.unit_id) m.day, m.project, {token_prefix} || u.number AS token, m.kind, m.arm
FROM read_rate_metrics m
JOIN memory_units u ON u.id = m.unit_id
WHERE m.kill AND (%(p)s::text IS NULL OR m.project = %(p)s::text)
ORDER BY m.unit_id, m.day DESC;
