-- Lock both units of a supersession, in id order so that two crossing ones (A replaces B while B replaces A) wait on
-- each other instead of deadlocking, and read what the checks after it need: each unit's status as live or not, and
-- what it already replaces. Its cycle check reads only after these locks, so it sees the other one's commit. FOR NO
-- KEY UPDATE, as an update of theirs would lock them (no key changes): a foreign key's check of them (decay's scores
-- of the day) never waits for it, nor deadlocks with it.
SELECT id::text, status IN {live_statuses} AS live, supersedes_id
FROM memory_units
WHERE id IN (%(new_id)s::uuid, %(old_id)s::uuid)
ORDER BY id
FOR NO KEY UPDATE;
