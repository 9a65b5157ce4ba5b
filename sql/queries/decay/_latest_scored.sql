-- Fragment: the day %(day)s is the latest scored for unit u (alias): a day's marks (stale, expired) come from a unit's
-- latest scored day only, so a re-run of an earlier day marks nothing a later day found otherwise.
NOT EXISTS (SELECT 1 FROM decay_scores l WHERE l.unit_id = u.id AND l.day > %(day)s::date)
