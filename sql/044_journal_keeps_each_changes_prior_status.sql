-- The change journal keeps each change's prior status, and is read by time (docs/scaling.md item 49). A day's decay,
-- and the check that it covers the day, take a unit's status at the day's end from the journal for every unit
-- changed since (decay/_units_live_at): they read every journal row for the units changed since, and found those
-- units by a scan of the whole journal, which is never pruned (1.38x yesterday's decay on a 240,000-row journal). A
-- unit's status at a time is the prior status of its first change after it, so each update and delete row now keeps
-- the status it replaced (memory_units_journal, now sql/functions/memory_units_journal.sql), and a BRIN index on
-- `at` (the journal is written in time order; a write pays almost nothing for it) reads the changes since a day's
-- end alone. Rows journaled before this migration take their prior status from the unit's journal row before them
-- (one pass over the journal, holding the table's lock: unit writes wait for it).
--
-- The function file is applied in this migration's transaction (database.migrate applies the files due in the
-- newest migration's): applied in a transaction of its own, an update journaled in between (another process's,
-- waiting on this migration's lock) kept no prior status, and an attacker's pass measured a day's read at 14.8 s
-- against 74 ms after a bulk status update ran in that window.
--
-- sql/functions/memory_units_journal.sql sha256 1b04e2c4aa12de84f471f0942cce36213f7e834e65765c34b400ac53f50cd933
ALTER TABLE memory_changes ADD COLUMN IF NOT EXISTS prior_status text;

UPDATE memory_changes c SET prior_status = p.status
FROM (SELECT seq, lag(status) OVER (PARTITION BY unit_id ORDER BY seq) AS status FROM memory_changes) AS p
WHERE p.seq = c.seq AND c.change <> 'insert' AND c.prior_status IS NULL AND p.status IS NOT NULL;

CREATE INDEX IF NOT EXISTS memory_changes_at ON memory_changes USING brin (at);
