-- Retire a near-duplicate as a duplicate of the unit it merged into.
UPDATE memory_units
SET status = {status_retired}, duplicate_of = %(canonical)s::uuid, updated_by = 'curation'
WHERE id = %(newcomer)s::uuid
RETURNING project;
