-- Fragment: whether the kill switch is on, as a write's statement reads it (memory_writes_killed: the switch's lock
-- held to its commit), evaluated once per statement.
(SELECT memory_writes_killed())
