-- Another unit of the project holding this content, live or forgotten (in any wording it held): a correction never
-- takes a live unit's text (one live unit per content) nor a forgotten unit's (forgotten text is never stored
-- again). Whether the live holder is private: it is not named.
SELECT number, forgotten, private
FROM (SELECT number, false AS forgotten, private_to IS NOT NULL AS private
      FROM memory_units
      WHERE project = %(project)s AND kind = %(kind)s AND content_hash = %(content_hash)s AND id <> %(unit_id)s
        AND status IN {live_statuses}
      UNION ALL
      SELECT number, true, false
      FROM memory_forgotten_contents
      WHERE project = %(project)s AND kind = %(kind)s AND content_hash = %(content_hash)s
        AND unit_id <> %(unit_id)s) AS holders
ORDER BY forgotten
LIMIT 1;
