-- The unit a new one supersedes, as its writer reads it: a unit private to other personas is none to them, so a
-- writer can neither replace another persona's private fact nor learn from the answer that it exists.
SELECT id FROM memory_units
WHERE project = %(project)s::text AND number = %(number)s::bigint
  AND (private_to IS NULL OR %(persona)s::text = ANY (private_to));
