-- One unit by (project, number), every column but the generated tsv; a link to another unit (supersedes,
-- conflicts with, duplicate of, consolidated into) only where the reader may see that unit too (row-level security).
-- A private unit names only the reading persona to it, in its audience and as its writer (the owner and the
-- project's operators read it whole): a persona whose write of the same text joined the unit learns no other
-- persona's name from it.
SELECT u.id, u.project, u.number, u.type, u.kind, u.title, u.body, u.paths, u.keywords, u.personas, u.status,
       u.confidence, u.importance, u.trust, u.confirms, u.flags, u.revision, u.content_hash, u.valid_from,
       u.valid_until,
       (SELECT l.id FROM memory_units l WHERE l.id = u.supersedes_id) AS supersedes_id,
       (SELECT l.id FROM memory_units l WHERE l.id = u.conflicts_with) AS conflicts_with,
       (SELECT l.id FROM memory_units l WHERE l.id = u.duplicate_of) AS duplicate_of,
       CASE WHEN m.masked AND u.created_by IS DISTINCT FROM memory_persona() THEN NULL ELSE u.created_by END
           AS created_by,
       u.created_at,
       CASE WHEN m.masked AND u.updated_by IS DISTINCT FROM memory_persona() THEN NULL ELSE u.updated_by END
           AS updated_by,
       u.updated_at, u.last_confirmed_at, u.last_used_at,
       u.last_injected_at, u.expired_at,
       (SELECT l.id FROM memory_units l WHERE l.id = u.consolidated_into) AS consolidated_into,
       CASE WHEN m.masked THEN ARRAY[memory_persona()] ELSE u.private_to END AS private_to
FROM memory_units u
CROSS JOIN LATERAL (SELECT u.private_to IS NOT NULL AND memory_persona() IS NOT NULL
                           AND NOT u.project = ANY ((SELECT memory_scope('forget'))::text[])) AS m (masked)
WHERE u.project = %(project)s AND u.number = %(number)s;
