-- memory_units_active (sql/001: a project's active units by kind) is a prefix of what sql/017's content probe index
-- already holds in order (project, status, kind, content hash): every read that names the project and the active
-- status (the bundle's eligible units, the prompt's units) reads the same rows by that index's first two columns.
-- Every write paid for both: one index fewer on memory_units is ~20-30 us of remember()'s ~450 us on the server
-- (docs/scaling.md item 21), and as much of each unit a bulk fold makes.
DROP INDEX IF EXISTS memory_units_active;
