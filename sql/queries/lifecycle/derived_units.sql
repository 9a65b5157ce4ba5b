-- The units of %(project)s not yet forgotten that hold text derived from the given forgotten units, or their text
-- itself: weekly summaries built from them (a member link names them: the current summary and those earlier runs of
-- the week retired, or a cluster lists them), near-duplicates a merge retired into them (the same fact in other
-- words), and every unit holding the same content as one of them, in its last wording or one it held before a
-- correction (a superseded or retired one, one written in the earlier words meanwhile).
SELECT u.id
FROM memory_units u
WHERE u.project = %(project)s AND u.status <> {status_forgotten}
  AND ({lifecycle/_summary_of}
       OR EXISTS (SELECT 1 FROM consolidation_clusters c
                  WHERE c.consolidated_unit = u.id AND c.members && %(ids)s::uuid[])
       OR u.duplicate_of = ANY (%(ids)s::uuid[])
       OR EXISTS (SELECT 1 FROM memory_forgotten_contents f
                  WHERE f.unit_id = ANY (%(ids)s::uuid[]) AND f.project = u.project AND f.kind = u.kind
                    AND f.content_hash = u.content_hash))
ORDER BY u.number;
