-- Capture one gated candidate (a JSON object of the inbox columns) and fold it in one statement, under the canon
-- version its gates read: memory_remember_gated (sql/functions/memory_remember_gated.sql); its outcome, unit id,
-- number, status and whether it was a replay.
SELECT outcome, unit_id, number, status, replayed
FROM memory_remember_gated(%(row)s::jsonb, %(trust)s::real, %(canon)s::uuid);
