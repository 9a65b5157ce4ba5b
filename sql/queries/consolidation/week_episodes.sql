-- A project's consolidatable episodes created in [%(start)s, %(end)s) with their current %(model)s vectors.
-- Only episodes every reader sees: a private one never surfaces in a shared summary.
SELECT u.id, u.number, u.kind, u.title, u.body, u.keywords, e.embedding
FROM memory_units u
JOIN memory_embeddings e ON e.unit_id = u.id AND e.model_key = %(model)s::text
                        AND e.unit_revision = u.revision AND e.content_hash = u.content_hash
WHERE u.project = %(project)s::text AND u.type = 'episodic' AND u.status IN {consolidatable_statuses}
  AND u.private_to IS NULL
  AND u.created_at >= %(start)s::timestamptz AND u.created_at < %(end)s::timestamptz
ORDER BY u.number;
