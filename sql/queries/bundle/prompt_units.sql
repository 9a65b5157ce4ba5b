-- Token, kind, title and body of a project's active units among %(numbers)s (for a prompt block).
SELECT {token_prefix} || number AS id, kind, title, body
FROM memory_units
WHERE project = %(project)s::text AND number = ANY (%(numbers)s::bigint[]) AND status = {status_active};
