-- The fold's content probes (is this content live, or forgotten, in its project?) read memory_units by project,
-- status, kind and content hash. Planned on a young table, they chose (project, status) and filtered the kind and
-- hash over every live unit of the project: a plan prepared while the table was small kept doing so until the next
-- ANALYZE, and remember() went from 3.7 to 8.6 ms as one project grew to 4,000 units. With the kind and hash in
-- the index, every index that can serve a probe reaches its rows by the whole key; listings by status keep their
-- (project, status) prefix.
CREATE INDEX IF NOT EXISTS memory_units_project_status_content ON memory_units (project, status, kind, content_hash);
DROP INDEX IF EXISTS memory_units_project_status;
