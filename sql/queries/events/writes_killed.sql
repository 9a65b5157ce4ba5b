-- Whether the kill switch is on, read by a write in its own transaction: the switch's lock is then held to its commit
-- (sql/functions/memory_writes_killed.sql).
SELECT memory_writes_killed();
