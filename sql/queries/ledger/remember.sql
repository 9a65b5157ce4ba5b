-- Capture one gated candidate (a JSON object of the inbox columns) and fold it in one statement, under the canon
-- version its gates read: memory_remember_gated (sql/022_remember_checks_the_canon.sql) around memory_remember
-- (sql/019_remember_one_row.sql); its outcome, unit id, number, status and whether it was a replay.
SELECT outcome, unit_id, number, status, replayed
FROM memory_remember_gated(%(row)s::jsonb, %(trust)s::real, %(canon)s::uuid);
