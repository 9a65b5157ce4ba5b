-- Hold the project's counter row until commit, as every fold does before it links a row: no fold of the project
-- runs while a forget tombstones and blanks, so no row is linked to the unit after the blanking read the inbox,
-- and a fold never holds a row lock that the forget waits for (a private unit's audience trigger did).
SELECT 1 FROM memory_projects WHERE project = %(project)s FOR UPDATE;
