-- Drop forgotten units (by token) from every stored bundle revision of their project.
UPDATE memory_bundles b
SET units = jsonb_array_length(kept.units),
    bundle = jsonb_set(b.bundle, ARRAY['units'], kept.units)
FROM (SELECT k.project, k.revision,
             (SELECT coalesce(jsonb_agg(e.u ORDER BY e.n), '[]')
              FROM jsonb_array_elements(k.bundle->'units') WITH ORDINALITY AS e(u, n)
              WHERE NOT (e.u->>'id') = ANY (%(tokens)s::text[])) AS units
      FROM memory_bundles k
      WHERE k.project = %(project)s
        AND EXISTS (SELECT 1 FROM jsonb_array_elements(k.bundle->'units') AS e(u)
                    WHERE e.u->>'id' = ANY (%(tokens)s::text[]))) AS kept
WHERE b.project = kept.project AND b.revision = kept.revision;
