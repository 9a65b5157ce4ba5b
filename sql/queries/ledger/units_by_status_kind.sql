-- Units by status and kind, of one project or (with %(project)s NULL) of all.
SELECT status, kind, count(*)
FROM memory_units
WHERE %(project)s::text IS NULL OR project = %(project)s
GROUP BY status, kind;
