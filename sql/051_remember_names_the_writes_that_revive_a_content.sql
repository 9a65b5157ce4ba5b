-- remember()'s one statement said no write makes a content live without its project's counter row; one does: a week's
-- summary revived by its next run (sql/queries/consolidation/live_summary.sql), which sql/050's fold retries around.
-- Its ON CONFLICT links the row to that unit, as before; only the function's comment changes.
--
-- sql/functions/memory_remember_gated.sql sha256 95ebe47f6363bf4d97c0b7230ee5531b8a5ccb886d85c0d168127ce62f50e909
-- Nothing else changes here: migrate() applies the function files after this migration, in its transaction.
SELECT 1;
