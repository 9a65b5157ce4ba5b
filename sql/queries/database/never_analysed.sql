-- Whether no ANALYZE or VACUUM has read a table yet (-1 rows: the planner has no statistics of it).
SELECT reltuples < 0 FROM pg_class WHERE oid = %(table)s::regclass;
