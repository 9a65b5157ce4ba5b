-- A unit's text corrected in place (same fact, better words); the revision trigger raises its revision. Only over
-- the revision the correction read (the fields it leaves are that revision's, its content hash the one replaced)
-- and never on a forgotten unit, whose tombstone never takes text again: no row otherwise. The wording replaced is
-- kept as its hash, so that once the unit is forgotten no write stores it again, with when the unit held it: from
-- its previous correction (or its creation) until now, by the clock read after the caller took the project's counter
-- row (its latest tenure, for a wording held twice): a row captured then and folded later is the unit's duplicate
-- (sql/040).
WITH corrected AS (
    UPDATE memory_units
    SET title = %(title)s, body = %(body)s, keywords = %(keywords)s, content_hash = %(content_hash)s,
        updated_by = %(actor)s
    WHERE id = %(unit_id)s AND status <> {status_forgotten} AND revision = %(read_revision)s
    RETURNING id, project, kind, revision, created_at
), former AS (
    INSERT INTO memory_former_wordings (project, kind, content_hash, unit_id, replaced_at, held_from)
    SELECT c.project, c.kind, %(read_content_hash)s, c.id, clock_timestamp(),
           coalesce((SELECT max(w.replaced_at) FROM memory_former_wordings w WHERE w.unit_id = c.id), c.created_at)
    FROM corrected c WHERE %(read_content_hash)s <> %(content_hash)s
    ON CONFLICT (project, kind, content_hash, unit_id)
    DO UPDATE SET replaced_at = EXCLUDED.replaced_at, held_from = EXCLUDED.held_from
)
SELECT revision FROM corrected;
