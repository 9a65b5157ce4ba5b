-- Remove captured rows that no fold can take (the database refuses their unit): left in the inbox, they would fail
-- every later fold of their day.
DELETE FROM memory_inbox WHERE idempotency_key = ANY (%(keys)s::text[]) AND unit_id IS NULL;
