-- What scoring needs for every fused candidate, read from the sources its reader may see (a private source of
-- another persona must not move a shared unit's rank).
SELECT u.id::text AS unit_id, u.number, u.importance, u.trust, u.valid_from, src.personas, src.session_id,
       d.recency
FROM memory_units u
LEFT JOIN (SELECT s.unit_id, array_agg(DISTINCT lower(s.persona)) AS personas,
                  (array_agg(s.session_id ORDER BY s.id))[1] AS session_id
           FROM memory_sources s WHERE s.unit_id = ANY (%(ids)s::uuid[]) AND {recall/_visible_source}
           GROUP BY s.unit_id) AS src ON src.unit_id = u.id
LEFT JOIN (SELECT DISTINCT ON (unit_id) unit_id, recency FROM decay_scores  -- as_of recomputes recency instead
           WHERE NOT %(historical)s::boolean AND unit_id = ANY (%(ids)s::uuid[]) ORDER BY unit_id, day DESC) AS d
       ON d.unit_id = u.id
WHERE u.id = ANY (%(ids)s::uuid[]);
