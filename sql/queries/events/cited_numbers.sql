-- Which of the numbers an agent's output cites are units of this project that the citing persona reads (not
-- forgotten; one private to other personas is none to it), and none while the kill switch is on.
SELECT number FROM memory_units
WHERE project = %(project)s::text AND number = ANY (%(numbers)s::bigint[]) AND status <> %(forgotten)s::text
  AND (private_to IS NULL OR %(persona)s::text = ANY (private_to))
  AND NOT {events/_killed};
