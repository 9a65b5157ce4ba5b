-- A newcomer's nearest older live unit of the same project and kind, by cosine of current %(model)s vectors.
-- Only units every reader sees are compared: a merge never widens a private unit's audience.
SELECT o.id, o.number, o.title, o.body, 1 - (e.embedding <=> n.embedding) AS cosine
FROM memory_embeddings n
JOIN memory_units o ON o.project = %(project)s::text AND o.kind = %(kind)s::text AND o.number < %(number)s::bigint
                   AND o.status IN {live_statuses} AND o.private_to IS NULL
JOIN memory_embeddings e ON e.unit_id = o.id AND e.model_key = n.model_key
                        AND e.unit_revision = o.revision AND e.content_hash = o.content_hash
WHERE n.unit_id = %(unit_id)s::uuid AND n.model_key = %(model)s::text
ORDER BY e.embedding <=> n.embedding
LIMIT 1;
