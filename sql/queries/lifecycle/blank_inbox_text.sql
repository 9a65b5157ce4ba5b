-- Blank the captured text of every inbox row of the forgotten units: those that folded into them, and those
-- waiting to fold with content the units hold or held before a correction (buried now, as the fold would bury
-- them: linked to the tombstone).
UPDATE memory_inbox i
SET title = '', body = '', paths = '{}', keywords = '{}', unit_id = u.id,
    outcome = coalesce(i.outcome, {inbox_forgotten}), folded_at = coalesce(i.folded_at, now()), awaits_fold = false
FROM memory_units u
WHERE u.id = ANY (%(ids)s::uuid[])
  AND (i.unit_id = u.id
       OR (i.unit_id IS NULL AND i.project = u.project AND i.kind = u.kind
           AND i.content_hash IN (SELECT f.content_hash FROM memory_forgotten_contents f WHERE f.unit_id = u.id)));
