-- Fragment: whether %(persona)s reads a unit (alias u), as recall does: a unit private to other personas is none to
-- it, and a reader naming no persona (NULL) reads only units private to none. Writes and events by a persona use it.
(u.private_to IS NULL OR %(persona)s::text = ANY (u.private_to))
