-- Retire the summaries of a previous run of the week that no cluster names any more (this run re-created the
-- others, and a summary another week shares stays); forgotten ones stay forgotten.
UPDATE memory_units u
SET status = {status_retired}, updated_by = %(feed)s
WHERE u.id = ANY (%(unit_ids)s::uuid[]) AND u.status <> {status_forgotten}
  AND NOT EXISTS (SELECT 1 FROM consolidation_clusters c WHERE c.consolidated_unit = u.id);
