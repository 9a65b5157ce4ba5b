-- Move the COPY-staged candidates into the inbox in arrival order; a replayed idempotency key is a no-op.
INSERT INTO memory_inbox ({inbox_columns})
SELECT {inbox_columns} FROM inbox_stage ORDER BY id
ON CONFLICT (idempotency_key) DO NOTHING;
