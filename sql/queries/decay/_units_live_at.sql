-- Fragment: the units created before %(t)s that were live at %(t)s, whatever became of them since, so a day re-run
-- after a supersession, retirement, forget or revival sees the units that day saw. A unit changed at or after %(t)s
-- (sql/002: every change of its status or revision is journaled with its time) takes its status then from its first
-- change since: the status that change replaced (sql/044), or, where its insert is journaled after %(t)s (one
-- captured that day and folded late), its first status: the day's re-run after the fold scores it, as the day
-- catches up with its ledger; the others, and a unit whose first change since has no prior status (journaled
-- before sql/044 with no row of its unit before it), their status now. Only the changes since %(t)s are read (the
-- journal's BRIN index on `at`). A day's scores and the check that they cover the day both read this.
SELECT u.*
FROM memory_units u
LEFT JOIN (
    SELECT DISTINCT ON (c.unit_id) c.unit_id,
           CASE WHEN c.change = 'insert' THEN c.status ELSE c.prior_status END AS status
    FROM memory_changes c
    WHERE c.at >= %(t)s
    ORDER BY c.unit_id, c.seq
) since ON since.unit_id = u.id
WHERE u.created_at < %(t)s AND coalesce(since.status, u.status) IN {live_statuses}
