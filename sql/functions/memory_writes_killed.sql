-- Whether the kill switch is on, read by every write in its own transaction before it stores or counts anything
-- (sql/046). It takes the switch's advisory lock shared, held to the caller's commit, and reads the switch in a
-- statement of its own, so with a snapshot taken after the lock: set_switch, which commits the switch on and then
-- takes the lock exclusively, waits for every write that read it off. A write never waits for the lock: while
-- set_switch holds it or waits for it, the switch is on already, so the write is told so at once (it would hold
-- its pooled connection behind a stuck write for the whole drain otherwise). The lock's name is
-- vocabulary.KILL_SWITCH_LOCK.
CREATE OR REPLACE FUNCTION memory_writes_killed() RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    killed boolean;
BEGIN
    IF NOT pg_try_advisory_xact_lock_shared(hashtext('memory_switch:kill')) THEN
        RETURN true;  -- set_switch is turning the switch on: it committed it before asking for the lock
    END IF;
    SELECT coalesce((SELECT ks.value = 'on' FROM memory_switch ks WHERE ks.scope = 'kill' AND ks.key = ''), false)
    INTO killed;
    RETURN killed;
END $$;
