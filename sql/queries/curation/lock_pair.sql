-- Lock a merge's newcomer and canonical unit while both are live (the caller holds the derivation lock, so a
-- forget has committed or waits): fewer than two rows means one left the live statuses and nothing is merged.
SELECT id
FROM memory_units
WHERE id IN (%(newcomer)s::uuid, %(canonical)s::uuid) AND status IN {live_statuses}
ORDER BY id
FOR UPDATE;
