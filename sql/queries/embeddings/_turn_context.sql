-- Fragment: what a context-aware text version reads beside a unit's (alias u) own text when %(context)s: its
-- speaker (the persona of its first project-visible source) and the previous turn of its session (the session of
-- its first source; the nearest lower number, at most %(context_scan)s back, of a not-forgotten, project-visible
-- episodic unit with a source in that session). Only project-visible text: a private turn or speaker never enters
-- a vector, not even one of a unit private to the same persona, since that unit becomes shared (its vector with
-- it) when another source shares it.
LEFT JOIN LATERAL (
    SELECT (SELECT s.persona FROM memory_sources s
            WHERE s.unit_id = u.id AND s.visibility = {visibility_project}
            ORDER BY s.id LIMIT 1) AS speaker,
           (SELECT s.session_id FROM memory_sources s WHERE s.unit_id = u.id ORDER BY s.id LIMIT 1) AS session_id
    WHERE %(context)s::boolean AND u.type = 'episodic') AS own ON true
LEFT JOIN LATERAL (
    SELECT (SELECT ps.persona FROM memory_sources ps
            WHERE ps.unit_id = p.id AND ps.visibility = {visibility_project}
            ORDER BY ps.id LIMIT 1) AS prev_speaker,
           p.body AS prev_body, p.id AS prev_id, p.revision AS prev_revision
    FROM memory_units p
    WHERE own.session_id IS NOT NULL AND p.project = u.project
      AND p.number BETWEEN u.number - %(context_scan)s AND u.number - 1
      AND p.type = 'episodic' AND p.status <> {status_forgotten}
      AND p.private_to IS NULL
      AND EXISTS (SELECT 1 FROM memory_sources q WHERE q.unit_id = p.id AND q.session_id = own.session_id)
    ORDER BY p.number DESC
    LIMIT 1) AS prev ON true
