-- A unit's text corrected in place (same fact, better words); the revision trigger raises its revision. Only over
-- the revision the correction read (the fields it leaves are that revision's) and never on a forgotten unit, whose
-- tombstone never takes text again: no row otherwise.
UPDATE memory_units
SET title = %(title)s, body = %(body)s, keywords = %(keywords)s, content_hash = %(content_hash)s,
    updated_by = %(actor)s
WHERE id = %(unit_id)s AND status <> {status_forgotten} AND revision = %(read_revision)s
RETURNING revision;
