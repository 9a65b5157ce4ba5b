-- Capture one gated candidate (a JSON object of the inbox columns) and fold it in one statement: memory_remember
-- (sql/018_fold_functions.sql); its outcome, unit id, number, status and whether it was a replay.
SELECT outcome, unit_id, number, status, replayed
FROM memory_remember(%(row)s::jsonb, %(trust)s::real);
