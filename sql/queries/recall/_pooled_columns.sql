-- Fragment: a pool row (alias p) with what the candidates statement reads of its unit (alias u), in either branch
-- of recall/candidates' `pooled`.
p.*, u.type, u.number, u.importance, u.trust, u.valid_from, u.sources_beyond_origin, u.origin_visibility,
u.origin_persona, u.origin_session_id
