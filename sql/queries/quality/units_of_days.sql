-- The units created on the UTC days %(first)s to %(last)s with their source counts, for the expectations suite.
SELECT u.id::text, u.project, u.kind, u.type, u.status, char_length(u.title) AS title_chars,
       char_length(u.body) AS body_chars, u.confidence, u.importance, u.trust, u.created_by,
       (SELECT count(*) FROM memory_sources s WHERE s.unit_id = u.id) AS sources
FROM memory_units u
WHERE (u.created_at AT TIME ZONE 'UTC')::date BETWEEN %(first)s::date AND %(last)s::date;
