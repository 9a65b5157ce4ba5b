-- A unit's id by its number in a project, whatever its status, as the caller's scopes let it see the unit.
SELECT u.id FROM memory_units u WHERE u.project = %(project)s::text AND u.number = %(number)s::bigint;
