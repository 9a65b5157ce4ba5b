-- Conversation structure: episodic units of one session that sit next to each other (by number) are turns of one
-- exchange; an answer often sits one turn away from the turn that matches the question.
SELECT c.id::text AS of_id, n.id::text AS unit_id, abs(n.number - c.number) AS distance
FROM memory_units c
CROSS JOIN LATERAL (  -- a range of the (project, number) index per seed; the LIMIT keeps the planner there
    SELECT u.id, u.number FROM memory_units u
    WHERE u.project = c.project AND u.number BETWEEN c.number - %(window)s AND c.number + %(window)s
      AND u.id <> c.id AND u.type = 'episodic' AND {recall/_unit_filters}
    LIMIT 2 * %(window)s) AS n
WHERE c.id = ANY (%(ids)s::uuid[]) AND c.type = 'episodic'
  AND EXISTS (SELECT 1 FROM memory_sources a JOIN memory_sources b ON a.session_id = b.session_id
              WHERE a.unit_id = c.id AND b.unit_id = n.id);
