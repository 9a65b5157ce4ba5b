-- Send a unit to review, naming the unit it may contradict, unless it left the curatable statuses meanwhile (a unit
-- forgotten since curation read it stays forgotten) or its text changed since (the next run curates the new one).
UPDATE memory_units
SET status = {status_review}, conflicts_with = %(conflicts_with)s::uuid, updated_by = 'curation'
WHERE id = %(unit_id)s::uuid AND status IN {curatable_statuses} AND revision = %(revision)s;
