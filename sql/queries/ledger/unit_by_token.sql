-- One unit by (project, number), every column but the generated tsv.
SELECT id, project, number, type, kind, title, body, paths, keywords, personas, status, confidence, importance,
       trust, confirms, flags, revision, content_hash, valid_from, valid_until, supersedes_id, conflicts_with,
       duplicate_of, created_by, created_at, updated_by, updated_at, last_confirmed_at, last_used_at,
       last_injected_at, expired_at, consolidated_into, private_to
FROM memory_units
WHERE project = %(project)s AND number = %(number)s;
