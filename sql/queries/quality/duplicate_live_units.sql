-- Groups of live unit ids sharing (project, kind, content hash): invariant 4 holds when there is none.
SELECT array_agg(id ORDER BY number)
FROM memory_units
WHERE status IN {live_statuses}
GROUP BY project, kind, content_hash
HAVING count(*) > 1;
