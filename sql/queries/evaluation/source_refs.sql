-- Every unit of the evaluated projects with the source references its reader-less citations carry (the labels
-- of learned fusion: a candidate is evidence when one of them is).
SELECT s.unit_id::text AS unit_id, array_agg(DISTINCT s.source_ref) AS refs
FROM memory_sources s
WHERE s.project = ANY (%(projects)s) AND s.source_ref IS NOT NULL AND s.visibility = {visibility_project}
GROUP BY s.unit_id;
