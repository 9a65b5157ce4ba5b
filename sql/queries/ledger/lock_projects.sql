-- Lock the projects' counter rows for the transaction, in name order so concurrent folds never deadlock.
SELECT project FROM memory_projects
WHERE project = ANY (%(projects)s::text[])
ORDER BY project
FOR UPDATE;
