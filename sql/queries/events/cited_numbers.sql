-- Which of the numbers an agent's output cites are units of this project that the citing persona reads (not
-- forgotten), and none while the kill switch is on.
SELECT u.number FROM memory_units u
WHERE u.project = %(project)s::text AND u.number = ANY (%(numbers)s::bigint[]) AND u.status <> {status_forgotten}
  AND {ledger/_read_by_persona}
  AND NOT {events/_killed};
