-- Units waiting for a reviewer (of one project, or all when %(project)s is NULL), oldest first, each with the
-- unit it conflicts with.
SELECT u.project, {token_prefix} || u.number AS token, u.kind, u.type, u.title, u.confidence, u.created_at,
       CASE WHEN c.id IS NULL THEN NULL ELSE {token_prefix} || c.number END AS conflicts_with,
       c.title AS conflict_title
FROM memory_units u
LEFT JOIN memory_units c ON c.id = u.conflicts_with
WHERE u.status = {status_review} AND (%(project)s::text IS NULL OR u.project = %(project)s::text)
ORDER BY u.created_at, u.number;
