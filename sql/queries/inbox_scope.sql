-- Projects with unfolded inbox rows selected by %(day)s or %(ids)s.
SELECT DISTINCT project FROM memory_inbox i
WHERE i.unit_id IS NULL
  AND (%(day)s::date IS NULL OR (i.received_at AT TIME ZONE 'UTC')::date = %(day)s::date)
  AND (%(ids)s::bigint[] IS NULL OR i.id = ANY (%(ids)s::bigint[]))
ORDER BY project;
