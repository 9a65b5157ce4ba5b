-- The first round's best hits (%(ids)s, already filtered for their reader) as feedback for the query-side rounds:
-- each hit's text, the personas of the sources its reader may see, and its current vector of %(model)s (the
-- serving model; NULL when it has none). Runs inside the request's scoped transaction: row-level security applies.
SELECT u.id::text AS unit_id, u.title, u.body,
       (SELECT array_agg(DISTINCT s.persona ORDER BY s.persona) FROM memory_sources s
        WHERE s.unit_id = u.id AND s.persona IS NOT NULL AND {recall/_visible_source}) AS personas,
       e.embedding
FROM memory_units u
LEFT JOIN memory_embeddings e ON e.unit_id = u.id AND e.model_key = %(model)s::text
                             AND e.unit_revision = u.revision AND e.content_hash = u.content_hash
WHERE u.id = ANY (%(ids)s::uuid[]);
