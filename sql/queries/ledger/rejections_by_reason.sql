-- Rejected candidates by reason, of one project or (with %(project)s NULL) of all.
SELECT reason, sum(count)::bigint
FROM memory_rejections
WHERE %(project)s::text IS NULL OR project = %(project)s
GROUP BY reason;
