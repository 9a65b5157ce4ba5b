-- A project's highest unit number: the highest its units hold, or one a deleted unit held (memory_projects.
-- last_number, raised by memory_units_keep_numbers: sql/047), so no number is ever given twice. The writes read it
-- under the project's counter row lock and never update that row: a row updated at every write kept each of its
-- versions while any older snapshot lived (a pg_dump, a long query, a session idle in a transaction), and every write
-- and recall walked them all (docs/scaling.md item 56). Runs as the owner: a reader's row security leaves no unit out.
CREATE OR REPLACE FUNCTION memory_last_number(of_project text) RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
AS $$
    SELECT greatest(p.last_number, (SELECT max(u.number) FROM memory_units u WHERE u.project = p.project))
    FROM memory_projects p
    WHERE p.project = of_project
$$;
