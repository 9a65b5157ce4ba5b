-- Append one gated candidate (a JSON object of the inbox columns) to the inbox; a replayed idempotency key is a
-- no-op. One statement that a pipeline can queue, where COPY would need its own round trip.
INSERT INTO memory_inbox ({inbox_columns})
SELECT {inbox_columns} FROM jsonb_populate_record(NULL::memory_inbox, %(row)s::jsonb)
ON CONFLICT (idempotency_key) DO NOTHING;
