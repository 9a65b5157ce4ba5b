-- The idempotency keys of a UTC receive day's unfolded inbox rows: what the ledger asset folds for that day (by the
-- partial index of rows awaiting a fold, sql/045).
SELECT idempotency_key FROM memory_inbox
WHERE awaits_fold AND unit_id IS NULL AND (received_at AT TIME ZONE 'UTC')::date = %(day)s::date;
