-- UTC creation days of the units among %(ids)s whose vector for %(model)s is missing or bound to an older revision
-- or content, with how many such units each day holds (the partitions an embedding run must cover); for a
-- context-aware model (%(context)s) also the days of the turns up to %(context_scan)s after a changed unit, whose
-- embedded context may have moved on (the run re-embeds only those whose text changed).
SELECT day, count(*)
FROM (SELECT (u.created_at AT TIME ZONE 'UTC')::date AS day
      FROM memory_units u
      LEFT JOIN memory_embeddings e ON e.unit_id = u.id AND e.model_key = %(model)s::text
      WHERE {embeddings/_embeddable}
        AND u.id = ANY (%(ids)s::uuid[])
        AND (e.unit_id IS NULL OR e.unit_revision <> u.revision OR e.content_hash <> u.content_hash)
      UNION ALL
      SELECT (u.created_at AT TIME ZONE 'UTC')::date
      FROM memory_units c
      JOIN memory_units u ON u.project = c.project AND u.number BETWEEN c.number + 1 AND c.number + %(context_scan)s
      WHERE %(context)s::boolean AND c.id = ANY (%(ids)s::uuid[]) AND u.type = 'episodic'
        AND {embeddings/_embeddable} AND NOT (u.id = ANY (%(ids)s::uuid[]))) AS stale
GROUP BY day
ORDER BY day;
