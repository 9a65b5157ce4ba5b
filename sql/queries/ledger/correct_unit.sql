-- A unit's text corrected in place (same fact, better words); the revision trigger raises its revision.
UPDATE memory_units
SET title = %(title)s, body = %(body)s, keywords = %(keywords)s, content_hash = %(content_hash)s,
    updated_by = %(actor)s
WHERE id = %(unit_id)s
RETURNING revision;
