-- Fragment: (unit_id, status) of each unit whose status or revision changed at or after %(t)s, with the status it
-- had at %(t)s by the change journal (sql/002: every such change is journaled with its time), so a day re-run after
-- a supersession, retirement, forget or revival sees the status that day saw. A unit whose insert is journaled after
-- %(t)s has its first status: one captured that day and folded late is the day's, and a re-run after the fold scores
-- it (the day caught up with its ledger). A unit not listed has not changed since: its status now is its status then.
SELECT DISTINCT ON (c.unit_id) c.unit_id, c.status
FROM memory_changes c
WHERE c.unit_id IN (SELECT unit_id FROM memory_changes WHERE at >= %(t)s)
  AND (c.at < %(t)s OR c.change = 'insert')
ORDER BY c.unit_id, c.at < %(t)s DESC, c.seq DESC
