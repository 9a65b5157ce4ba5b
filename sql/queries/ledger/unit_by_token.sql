-- One unit by (project, number), every column but the generated tsv; a link to another unit (supersedes,
-- conflicts with, duplicate of, consolidated into) only where the reader may see that unit too (row-level security).
-- A private unit's audience names only the reading persona to it (the owner and the project's operators read it
-- whole): a persona whose write of the same text joined the unit learns no other persona's name from it.
SELECT u.id, u.project, u.number, u.type, u.kind, u.title, u.body, u.paths, u.keywords, u.personas, u.status,
       u.confidence, u.importance, u.trust, u.confirms, u.flags, u.revision, u.content_hash, u.valid_from,
       u.valid_until,
       (SELECT l.id FROM memory_units l WHERE l.id = u.supersedes_id) AS supersedes_id,
       (SELECT l.id FROM memory_units l WHERE l.id = u.conflicts_with) AS conflicts_with,
       (SELECT l.id FROM memory_units l WHERE l.id = u.duplicate_of) AS duplicate_of,
       u.created_by, u.created_at, u.updated_by, u.updated_at, u.last_confirmed_at, u.last_used_at,
       u.last_injected_at, u.expired_at,
       (SELECT l.id FROM memory_units l WHERE l.id = u.consolidated_into) AS consolidated_into,
       CASE WHEN u.private_to IS NULL OR memory_persona() IS NULL
                 OR u.project = ANY ((SELECT memory_scope('forget'))::text[]) THEN u.private_to
            ELSE ARRAY[memory_persona()] END AS private_to
FROM memory_units u
WHERE u.project = %(project)s AND u.number = %(number)s;
