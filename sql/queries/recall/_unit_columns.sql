-- Fragment: what the candidates statement reads of a unit (alias u), in every branch of recall/candidates' `pooled`
-- (after the pool's own columns, p.*, in the two that join it).
u.type, u.number, u.importance, u.trust, u.valid_from, u.sources_beyond_origin, u.origin_visibility,
u.origin_persona, u.origin_session_id, u.revision, u.content_hash
