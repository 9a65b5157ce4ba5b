-- A unit's text corrected in place (same fact, better words); the revision trigger raises its revision. A
-- forgotten unit matches no row: its tombstone never takes text again.
UPDATE memory_units
SET title = %(title)s, body = %(body)s, keywords = %(keywords)s, content_hash = %(content_hash)s,
    updated_by = %(actor)s
WHERE id = %(unit_id)s AND status <> {status_forgotten}
RETURNING revision;
