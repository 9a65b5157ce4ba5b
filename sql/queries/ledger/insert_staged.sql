-- Move the COPY-staged candidates into the inbox in arrival order; a replayed idempotency key is a no-op. The keys
-- of the staged rows that wait for a fold, each with whether this statement wrote it: the rows written, and of the
-- keys given (none when the caller folds at once), replays of rows captured earlier and never folded (an import
-- stopped between a capture and its fold). "Unfolded" is spelled as memory_fold spells it (sql/018 says why).
WITH written AS (
    INSERT INTO memory_inbox ({inbox_columns})
    SELECT {inbox_columns} FROM inbox_stage ORDER BY id
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING idempotency_key
)
SELECT idempotency_key, true FROM written
UNION ALL
SELECT i.idempotency_key, false
FROM memory_inbox i
WHERE i.idempotency_key = ANY (%(keys)s::text[]) AND coalesce(i.unit_id IS NULL, false);
