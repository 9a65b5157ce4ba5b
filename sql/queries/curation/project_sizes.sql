-- How many units each project has numbered: the size that picks curation's nearest-neighbour path.
SELECT project, last_number FROM memory_projects WHERE project = ANY (%(projects)s::text[]);
