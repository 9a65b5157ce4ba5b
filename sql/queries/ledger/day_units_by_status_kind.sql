-- Units created between two UTC days (inclusive), by status and kind.
SELECT status, kind, count(*)
FROM memory_units
WHERE (created_at AT TIME ZONE 'UTC')::date BETWEEN %(first)s AND %(last)s
GROUP BY status, kind;
