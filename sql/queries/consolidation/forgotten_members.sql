-- Which of the episodes a run read were forgotten since (the caller holds the project's derivation lock).
SELECT id FROM memory_units WHERE id = ANY (%(ids)s::uuid[]) AND status = {status_forgotten};
