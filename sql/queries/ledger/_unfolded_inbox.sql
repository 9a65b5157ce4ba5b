-- Fragment: the unfolded inbox rows (alias i) selected by %(day)s (a UTC receive day) or %(ids)s.
i.unit_id IS NULL
  AND (%(day)s::date IS NULL OR (i.received_at AT TIME ZONE 'UTC')::date = %(day)s::date)
  AND (%(ids)s::bigint[] IS NULL OR i.id = ANY (%(ids)s::bigint[]))
