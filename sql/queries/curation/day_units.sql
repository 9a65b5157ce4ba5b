-- The curatable units created on a UTC day that have a current vector of %(model)s (returned: curation compares
-- it) and an uncurated revision.
SELECT u.id, u.project, u.number, u.kind, u.type, u.status, u.title, u.body, e.embedding
FROM memory_units u
JOIN memory_embeddings e ON e.unit_id = u.id AND e.model_key = %(model)s::text
                        AND e.unit_revision = u.revision AND e.content_hash = u.content_hash
WHERE (u.created_at AT TIME ZONE 'UTC')::date = %(day)s::date AND u.status IN {curatable_statuses}
  AND u.curated_revision IS DISTINCT FROM u.revision
ORDER BY u.project, u.number;
