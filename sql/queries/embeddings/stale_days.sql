-- UTC creation days of the units among %(ids)s whose vector for %(model)s is missing or bound to an older revision
-- or content, with how many such units each day holds (the partitions an embedding run must cover).
SELECT (u.created_at AT TIME ZONE 'UTC')::date, count(*)
FROM memory_units u
LEFT JOIN memory_embeddings e ON e.unit_id = u.id AND e.model_key = %(model)s::text
WHERE {embeddings/_embeddable}
  AND u.id = ANY (%(ids)s::uuid[])
  AND (e.unit_id IS NULL OR e.unit_revision <> u.revision OR e.content_hash <> u.content_hash)
GROUP BY 1
ORDER BY 1;
