-- A project's units eligible for its bundle, in rank order: active, injectable types, unexpired, trusted enough,
-- path claims confirmed or observed within %(hours)s hours, and every source visible to the whole project.
SELECT {token_prefix} || u.number AS id, u.kind, u.type, u.title, u.paths, u.keywords, u.trust, u.importance,
       greatest(u.valid_from, coalesce(u.last_used_at, u.valid_from)) AS last_activity
FROM memory_units u
WHERE u.project = %(project)s::text AND u.status = {status_active} AND u.type = ANY (%(types)s::text[])
  AND u.expired_at IS NULL AND (u.valid_until IS NULL OR u.valid_until > now())
  AND u.trust >= %(min_trust)s::float8
  AND (u.paths = '{}'
       OR u.last_confirmed_at >= now() - make_interval(hours => %(hours)s::int)
       OR EXISTS (SELECT 1 FROM memory_sources s WHERE s.unit_id = u.id AND s.observed_sha IS NOT NULL
                  AND s.created_at >= now() - make_interval(hours => %(hours)s::int)))
  AND NOT EXISTS (SELECT 1 FROM memory_sources s
                  WHERE s.unit_id = u.id AND s.visibility <> {visibility_project})
ORDER BY u.trust DESC, u.importance DESC, last_activity DESC, u.number;
