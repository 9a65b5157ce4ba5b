-- The walk reads the model's current HNSW index from now on: its mark of an earlier graph goes (sql/029).
DELETE FROM memory_settings WHERE key = %(key)s::text;
