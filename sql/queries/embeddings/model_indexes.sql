-- The indexes on memory_embeddings whose names start with a model's prefix (memory_embeddings_hnsw_<key digest>) and
-- whose validity is %(valid)s (NULL: either): valid, its HNSW index and one built under earlier graph parameters that
-- the current one replaces; invalid, a concurrent build in progress or one that failed and left its index behind.
SELECT c.relname
FROM pg_catalog.pg_index i
JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'public.memory_embeddings'::regclass AND starts_with(c.relname, %(prefix)s)
  AND (%(valid)s::boolean IS NULL OR i.indisvalid = %(valid)s::boolean)
ORDER BY c.relname;
