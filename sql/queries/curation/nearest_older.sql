-- A newcomer's nearest older live unit of the same project and kind, by cosine of current %(model)s vectors to
-- the newcomer's %(vector)s, scanning every candidate (a project under HNSW_MIN_PROJECT_UNITS units, or when the
-- index surfaced none: curation/nearest_older_hnsw).
SELECT o.id, o.number, o.revision, o.title, o.body, 1 - (e.embedding <=> %(vector)s::vector) AS cosine
FROM memory_units o
JOIN memory_embeddings e ON e.unit_id = o.id AND e.model_key = %(model)s::text
                        AND e.unit_revision = o.revision AND e.content_hash = o.content_hash
WHERE {curation/_older_peers}
ORDER BY e.embedding <=> %(vector)s::vector
LIMIT 1;
