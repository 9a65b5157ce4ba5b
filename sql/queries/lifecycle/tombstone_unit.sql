-- Tombstone a unit: its text blanked, its validity closed, id, number and audit kept (runs under the actor's scopes).
UPDATE memory_units
SET status = {status_forgotten}, title = '', body = '', paths = '{}', keywords = '{}', personas = '{}',
    valid_until = coalesce(valid_until, greatest(valid_from, now())), updated_by = %(actor)s
WHERE project = %(project)s AND number = %(number)s::bigint AND status <> {status_forgotten}
RETURNING id;
