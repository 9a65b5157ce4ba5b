-- Give every new project its counter row (unit numbers start after last_number).
INSERT INTO memory_projects (project)
SELECT unnest(%(projects)s::text[])
ON CONFLICT (project) DO NOTHING;
