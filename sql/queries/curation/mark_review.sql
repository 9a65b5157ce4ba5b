-- Send a unit to review, naming the unit it may contradict.
UPDATE memory_units
SET status = {status_review}, conflicts_with = %(conflicts_with)s::uuid, updated_by = 'curation'
WHERE id = %(unit_id)s::uuid;
