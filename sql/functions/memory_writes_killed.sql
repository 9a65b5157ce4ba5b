-- Whether the kill switch is on, read by every write in its own transaction before it stores or counts anything
-- (sql/046). It first takes the switch's advisory lock shared, held to the caller's commit, and reads the switch
-- in a statement of its own, so with the snapshot taken after the lock: a write waits while the switch is being
-- set, then reads the new value, and set_switch, which takes the lock exclusively, waits for every write that read
-- the old one. The lock's name is vocabulary.KILL_SWITCH_LOCK.
CREATE OR REPLACE FUNCTION memory_writes_killed() RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    killed boolean;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtext('memory_switch:kill'));
    SELECT coalesce((SELECT ks.value = 'on' FROM memory_switch ks WHERE ks.scope = 'kill' AND ks.key = ''), false)
    INTO killed;
    RETURN killed;
END $$;
