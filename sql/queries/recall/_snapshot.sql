-- Fragment: what a recall statement read, as text (pg_current_snapshot), for the caller to tell whether two of its
-- statements read the same rows; NULL, never equal, on a hot standby in a READ COMMITTED transaction, whose snapshot
-- text leaves out the transactions still running (recovery keeps them all as subtransactions).
CASE WHEN NOT (pg_is_in_recovery() AND current_setting('transaction_isolation') = 'read committed')
     THEN pg_current_snapshot()::text END
