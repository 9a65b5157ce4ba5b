-- Drop a forgotten unit (by token) from every stored bundle revision of its project.
UPDATE memory_bundles
SET units = units - 1,
    bundle = jsonb_set(bundle, ARRAY['units'], (
        SELECT coalesce(jsonb_agg(u ORDER BY n), '[]')
        FROM jsonb_array_elements(bundle->'units') WITH ORDINALITY AS e(u, n)
        WHERE u->>'id' <> %(token)s::text))
WHERE project = %(project)s
  AND bundle->'units' @> jsonb_build_array(jsonb_build_object('id', %(token)s::text));
