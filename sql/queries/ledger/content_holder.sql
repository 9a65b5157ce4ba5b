-- Another unit of the project holding this content, live or forgotten, or a forgotten unit that held it before a
-- correction: a correction never takes a live unit's text (one live unit per content) nor a forgotten unit's, in
-- any of its wordings (forgotten text is never stored again). Whether the live holder is private: it is not named.
SELECT number, forgotten, private
FROM (SELECT number, status = {status_forgotten} AS forgotten, private_to IS NOT NULL AS private
      FROM memory_units
      WHERE project = %(project)s AND kind = %(kind)s AND content_hash = %(content_hash)s AND id <> %(unit_id)s
        AND (status IN {live_statuses} OR status = {status_forgotten})
      UNION ALL
      SELECT u.number, true, false
      FROM memory_former_wordings w
      JOIN memory_units u ON u.id = w.unit_id
      WHERE w.project = %(project)s AND w.kind = %(kind)s AND w.content_hash = %(content_hash)s
        AND u.id <> %(unit_id)s AND u.status = {status_forgotten}) AS holders
ORDER BY forgotten
LIMIT 1;
