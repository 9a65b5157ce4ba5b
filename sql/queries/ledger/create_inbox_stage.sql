-- The session's staging table that COPY fills before one INSERT … ON CONFLICT into the inbox (emptied at commit).
CREATE TEMP TABLE IF NOT EXISTS inbox_stage (LIKE memory_inbox INCLUDING DEFAULTS) ON COMMIT DELETE ROWS;
