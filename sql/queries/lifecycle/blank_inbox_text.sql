-- Blank the captured text of every inbox row that folded into a forgotten unit.
UPDATE memory_inbox
SET title = '', body = '', paths = '{}', keywords = '{}'
WHERE unit_id = %(unit_id)s::uuid;
