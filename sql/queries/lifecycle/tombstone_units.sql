-- Tombstone the units derived from a forgotten one (by id, in its project): text blanked, validity closed, id,
-- number and audit kept; runs under the actor's scopes like the tombstone it follows. Returns id and number.
UPDATE memory_units
SET status = {status_forgotten}, title = '', body = '', paths = '{}', keywords = '{}', personas = '{}',
    valid_until = coalesce(valid_until, greatest(valid_from, now())), updated_by = %(actor)s
WHERE id = ANY (%(ids)s::uuid[]) AND project = %(project)s AND status <> {status_forgotten}
RETURNING id, number;
