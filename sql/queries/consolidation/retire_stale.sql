-- Retire consolidated units of a previous run of the week that this run no longer produces (forgotten ones stay).
UPDATE memory_units
SET status = {status_retired}, updated_by = 'consolidation'
WHERE id = ANY (%(unit_ids)s::uuid[]) AND status <> {status_forgotten};
