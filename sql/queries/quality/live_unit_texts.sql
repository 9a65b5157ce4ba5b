-- The text of every live unit, for the secret gate to re-run over.
SELECT id, title, body, paths, keywords FROM memory_units WHERE status IN {live_statuses};
