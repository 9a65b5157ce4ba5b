-- What the secret gate read of every unit that holds text (a tombstone holds none; a superseded or retired unit is
-- still served `as_of`): its title, body, paths and keywords, and the ids its sources store beside it.
SELECT u.id, u.title, u.body, u.paths, u.keywords,
       ARRAY(SELECT i FROM memory_sources s CROSS JOIN LATERAL unnest(ARRAY[{provenance_columns}]) AS i
             WHERE s.unit_id = u.id AND i IS NOT NULL) AS provenance_ids
FROM memory_units u
WHERE u.status <> {status_forgotten};
