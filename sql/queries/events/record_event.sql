-- Record one usage event of a unit (by project and number) once per (task, unit, kind), and stamp the unit's
-- last injection or last use. Only a unit the recording persona reads counts (one private to other personas is none
-- to it, as in recall), and nothing is recorded while the kill switch is on (read again under its lock before the
-- commit: events.stored_unless_killed): the one place both are decided.
WITH new AS (
    INSERT INTO memory_events (unit_id, project, task_id, kind, channel, session_id, provisional)
    SELECT u.id, u.project, %(task_id)s::text, %(kind)s::text, %(channel)s::text, %(session_id)s::text,
           %(provisional)s::boolean
    FROM memory_units u
    WHERE u.project = %(project)s::text AND u.number = %(number)s::bigint
      AND {ledger/_read_by_persona}
      AND NOT {events/_killed}
    ON CONFLICT (task_id, unit_id, kind) DO NOTHING
    RETURNING unit_id, kind, at
)
UPDATE memory_units u
SET last_injected_at = CASE WHEN new.kind = 'injected' THEN greatest(u.last_injected_at, new.at)
                            ELSE u.last_injected_at END,
    last_used_at = CASE WHEN new.kind <> 'injected' THEN greatest(u.last_used_at, new.at) ELSE u.last_used_at END
FROM new
WHERE u.id = new.unit_id;
