-- A unit's confirmations and flags, one per task.
SELECT count(*) FILTER (WHERE vote = 1), count(*) FILTER (WHERE vote = -1)
FROM memory_votes
WHERE unit_id = %(unit_id)s::uuid;
