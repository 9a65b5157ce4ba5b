-- This backend's pending table counters flushed at the end of this statement's transaction (they are otherwise
-- sent at most once a second): a statistics check then reads the rows this connection just wrote (refresh_statistics),
-- or the import's next check the rows its batches just wrote (capture.remember_many), and an ANALYZE after it is not
-- followed by their late arrival, which would make the table look changed again.
SELECT pg_stat_force_next_flush();
