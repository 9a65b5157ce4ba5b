-- Fragment: what a context-aware text version reads beside a unit's (alias u) own text when %(context)s: its
-- speaker (the persona of its first source every reader of the unit may see) and the previous turn of its session
-- (the nearest lower number, at most %(context_scan)s back, of a not-forgotten episodic unit with a source in that
-- session, readable by every reader of the unit: another persona's private turn never enters a shared vector).
LEFT JOIN LATERAL (
    SELECT s.persona AS speaker, s.session_id
    FROM memory_sources s
    WHERE s.unit_id = u.id AND %(context)s::boolean AND u.type = 'episodic'
      AND (s.visibility = {visibility_project} OR u.private_to IS NOT NULL)
    ORDER BY s.id
    LIMIT 1) AS own ON true
LEFT JOIN LATERAL (
    SELECT (SELECT ps.persona FROM memory_sources ps
            WHERE ps.unit_id = p.id AND (ps.visibility = {visibility_project} OR p.private_to IS NOT NULL)
            ORDER BY ps.id LIMIT 1) AS prev_speaker,
           p.body AS prev_body
    FROM memory_units p
    WHERE own.session_id IS NOT NULL AND p.project = u.project
      AND p.number BETWEEN u.number - %(context_scan)s AND u.number - 1
      AND p.type = 'episodic' AND p.status <> {status_forgotten}
      AND (p.private_to IS NULL OR (u.private_to IS NOT NULL AND u.private_to <@ p.private_to))
      AND EXISTS (SELECT 1 FROM memory_sources q WHERE q.unit_id = p.id AND q.session_id = own.session_id)
    ORDER BY p.number DESC
    LIMIT 1) AS prev ON true
