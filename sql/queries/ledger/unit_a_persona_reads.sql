-- A unit by its number, as a persona reads it (none: a reader naming no persona): a unit private to other personas
-- is none to it, so a writer or a voter can neither change another persona's private fact nor learn that it exists;
-- nor is a forgotten one (a tombstone takes no vote and is replaced by nothing).
SELECT id FROM memory_units
WHERE project = %(project)s::text AND number = %(number)s::bigint
  AND (private_to IS NULL OR %(persona)s::text = ANY (private_to))
  AND status <> {status_forgotten};
