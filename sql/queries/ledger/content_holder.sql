-- Another unit of the project holding this content, live or forgotten: a correction never takes a live unit's text
-- (one live unit per content) nor a forgotten unit's (forgotten text is never stored again).
SELECT number, status = {status_forgotten} AS forgotten
FROM memory_units
WHERE project = %(project)s AND kind = %(kind)s AND content_hash = %(content_hash)s AND id <> %(unit_id)s
  AND (status IN {live_statuses} OR status = {status_forgotten})
ORDER BY status = {status_forgotten}
LIMIT 1;
