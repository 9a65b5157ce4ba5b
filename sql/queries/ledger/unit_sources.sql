-- The sources (provenance) of one unit, oldest first.
SELECT {provenance_columns}, created_at
FROM memory_sources
WHERE unit_id = %(unit_id)s
ORDER BY id;
