-- Every project with the sequence number of its latest unit change (0 when none): what bundles are compiled for.
SELECT p.project, coalesce(max(c.seq), 0)
FROM memory_projects p
LEFT JOIN memory_changes c USING (project)
GROUP BY p.project
ORDER BY p.project;
