-- Raise the importance of a unit that absorbed a near-duplicate, capped at 1.
UPDATE memory_units
SET importance = least(1.0, importance + %(bump)s::float8), updated_by = 'curation'
WHERE id = %(unit_id)s::uuid;
