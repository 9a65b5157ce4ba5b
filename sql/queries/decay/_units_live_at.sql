-- Fragment: the units created before %(t)s that were live at %(t)s, whatever became of them since, so a day re-run
-- after a supersession, retirement, forget or revival sees the units that day saw. A unit whose status or revision
-- changed at or after %(t)s takes its status then from the change journal (sql/002: every such change is journaled
-- with its time; a unit whose insert is journaled after %(t)s, one captured that day and folded late, its first
-- status: the day's re-run after the fold scores it, as the day catches up with its ledger); the others their status
-- now. A day's scores and the check that they cover the day both read this.
SELECT u.*
FROM memory_units u
LEFT JOIN (
    SELECT DISTINCT ON (c.unit_id) c.unit_id, c.status
    FROM memory_changes c
    WHERE c.unit_id IN (SELECT unit_id FROM memory_changes WHERE at >= %(t)s)
      AND (c.at < %(t)s OR c.change = 'insert')
    ORDER BY c.unit_id, c.at < %(t)s DESC, c.seq DESC
) since ON since.unit_id = u.id
WHERE u.created_at < %(t)s AND coalesce(since.status, u.status) IN {live_statuses}
