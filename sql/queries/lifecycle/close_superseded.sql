-- Close a live unit that a newer one replaces: superseded, valid until now, still queryable as_of.
UPDATE memory_units
SET status = {status_superseded}, valid_until = greatest(valid_from, now()), updated_by = %(actor)s
WHERE id = %(old_id)s::uuid AND status IN {live_statuses}
RETURNING project;
