-- The sources (provenance) of one unit, oldest first: under authz.scoped only those its reader may see (a private
-- source only for its persona: the read policy of sql/009_read_scopes.sql).
SELECT {provenance_columns}, created_at
FROM memory_sources
WHERE unit_id = %(unit_id)s
ORDER BY id;
