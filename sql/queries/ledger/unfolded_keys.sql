-- The idempotency keys of a UTC receive day's unfolded inbox rows: what the ledger asset folds for that day.
SELECT idempotency_key FROM memory_inbox
WHERE unit_id IS NULL AND (received_at AT TIME ZONE 'UTC')::date = %(day)s::date;
