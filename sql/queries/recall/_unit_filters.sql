-- Fragment: every filter of the recall path on a unit (alias u), applied inside each leg before its LIMIT
-- (private_to: sql/007_visibility.sql).
u.project = %(project)s
    AND (u.private_to IS NULL OR %(reader)s::text = ANY (u.private_to))
    AND u.status IN {recallable_statuses}
    AND u.valid_from <= %(at)s::timestamptz AND (u.valid_until IS NULL OR u.valid_until > %(at)s::timestamptz)
    AND (u.expired_at IS NULL OR (%(historical)s::boolean AND u.expired_at > %(at)s::timestamptz))
    AND (%(kinds)s::text[] IS NULL OR u.kind = ANY (%(kinds)s::text[]))
    AND (%(types)s::text[] IS NULL OR u.type = ANY (%(types)s::text[]))
    AND (%(paths)s::text[] IS NULL OR EXISTS (
        SELECT 1 FROM unnest(u.paths) AS have, unnest(%(paths)s::text[]) AS want WHERE starts_with(have, want)))
