-- Link a consolidated unit to each member episode: one source per member, its token as the source reference.
INSERT INTO memory_sources (unit_id, project, feed, task_id, source_ref)
SELECT %(unit_id)s::uuid, %(project)s::text, %(feed)s::text, m.id::text, {token_prefix} || m.number
FROM memory_units m
WHERE m.id = ANY (%(members)s::uuid[])
ON CONFLICT (unit_id, task_id) DO NOTHING;
