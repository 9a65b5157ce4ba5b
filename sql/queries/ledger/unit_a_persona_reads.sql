-- A unit by its number, as a persona reads it (ledger/_read_by_persona), so a writer or a voter can neither change
-- another persona's private fact nor learn that it exists; nor is a forgotten one (a tombstone takes no vote and is
-- replaced by nothing).
SELECT u.id FROM memory_units u
WHERE u.project = %(project)s::text AND u.number = %(number)s::bigint AND {ledger/_read_by_persona}
  AND u.status <> {status_forgotten};
