-- The curatable units created on a UTC day that have a current vector of %(model)s (returned: curation compares
-- it) and an uncurated revision, each with whether its project is large enough (%(hnsw_min)s numbered units) for
-- curation to walk the HNSW index instead of scanning, and holds enough of the store's vectors (memory_hnsw_walks,
-- sql/020, as recall's walk: a walk past mostly other projects' vectors is slow and sees few of its own). Each
-- project's size is read once (memory_last_number, a call per unit took 11 us of each).
WITH sizes AS MATERIALIZED (
    SELECT d.project, coalesce(memory_last_number(d.project), 0) AS units
    FROM (SELECT DISTINCT u.project FROM memory_units u
          WHERE (u.created_at AT TIME ZONE 'UTC')::date = %(day)s::date) AS d
)
SELECT u.id, u.project, u.number, u.revision, u.kind, u.type, u.status, u.title, u.body, e.embedding,
       p.units >= %(hnsw_min)s::bigint AND memory_hnsw_walks(p.units, %(walk_min_share)s) AS large
FROM memory_units u
JOIN memory_embeddings e ON e.unit_id = u.id AND e.model_key = %(model)s::text
                        AND e.unit_revision = u.revision AND e.content_hash = u.content_hash
JOIN sizes p ON p.project = u.project
WHERE (u.created_at AT TIME ZONE 'UTC')::date = %(day)s::date AND u.status IN {curatable_statuses}
  AND u.curated_revision IS DISTINCT FROM u.revision
ORDER BY u.project, u.number;
