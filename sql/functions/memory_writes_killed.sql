-- Whether the kill switch is on, read by every write as its last statement before the commit, after every wait
-- (sql/049; first in sql/046). It tries the switch's advisory lock shared, held to the caller's commit, then reads the
-- switch in a statement of its own, so with a snapshot taken after the lock: set_switch, which commits the switch on
-- and then takes the lock exclusively, waits for every write that read it off, and those are committing. A write
-- never waits for the lock: where set_switch holds it or asks for it, the switch reads on already, and the write
-- stores nothing at once. Only set_switch takes it exclusively: two keys, apart from every one-key lock
-- (vocabulary.KILL_SWITCH_LOCK); a session that took it by hand makes set_switch's drain fail (TimeoutError), never
-- a write read the switch as on.
CREATE OR REPLACE FUNCTION memory_writes_killed() RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    killed boolean;
BEGIN
    PERFORM pg_try_advisory_xact_lock_shared(7169389, 1802071148);
    SELECT coalesce((SELECT ks.value = 'on' FROM memory_switch ks WHERE ks.scope = 'kill' AND ks.key = ''), false)
    INTO killed;
    RETURN killed;
END $$;
