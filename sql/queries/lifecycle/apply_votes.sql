-- Store a unit's recounted votes and trust; an active unit flagged past the threshold (and more flagged than
-- confirmed) becomes flagged. A new or changed confirmation (%(vote)s = 1, %(changed)s > 0) stamps last_confirmed_at.
UPDATE memory_units
SET confirms = %(confirms)s::int, flags = %(flags)s::int, trust = %(trust)s::real,
    last_confirmed_at = CASE WHEN %(vote)s::int = 1 AND %(changed)s::bigint > 0 THEN now() ELSE last_confirmed_at END,
    status = CASE WHEN status = {status_active} AND %(flags)s::int >= %(threshold)s::int
                       AND %(flags)s::int > %(confirms)s::int
                  THEN {status_flagged} ELSE status END
WHERE id = %(unit_id)s::uuid
RETURNING status;
