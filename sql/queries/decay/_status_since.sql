-- Fragment: (unit_id, status) of each unit whose status or revision changed at or after %(t)s, with the status it
-- had at %(t)s by the change journal (sql/002: every such change is journaled with its time), NULL when its insert
-- is journaled after %(t)s (a row captured that day and folded later was not in the ledger then), so a day re-run
-- after a late fold, a supersession, retirement, forget or revival sees what that day saw. A unit not listed has not
-- changed since: its status now is its status then.
SELECT DISTINCT ON (c.unit_id) c.unit_id, CASE WHEN c.at < %(t)s THEN c.status END AS status
FROM memory_changes c
WHERE c.unit_id IN (SELECT unit_id FROM memory_changes WHERE at >= %(t)s)
ORDER BY c.unit_id, c.at < %(t)s DESC, c.seq DESC
