-- What became of one captured candidate, by its idempotency key: its inbox outcome, the unit it folded into, and
-- whether it was folded before this transaction (a replay: the row's version is not this transaction's).
SELECT i.outcome, i.unit_id, u.number, u.status, i.xmin <> pg_current_xact_id()::xid AS replayed
FROM memory_inbox i
JOIN memory_units u ON u.id = i.unit_id
WHERE i.idempotency_key = %(key)s;
