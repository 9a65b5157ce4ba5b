-- Move the COPY-staged candidates into the inbox in arrival order; a replayed idempotency key is a no-op. The keys
-- of the staged rows that wait for a fold, each with whether this statement wrote it: the rows written, and for a
-- caller that `folds_later` (by keys, in another transaction), replays of the keys given captured earlier and never
-- folded (a caller stopped between a capture and its fold). Only such a caller's rows await their fold (sql/045):
-- a caller folding them in this transaction links them in HOT updates. "Unfolded" is spelled as memory_fold spells
-- it (its file says why). Otherwise the second leg is off by a flag, never by an empty key list: a constant
-- `= ANY ('{}')` is false, which "implies" any partial index (then the one of unfolded rows, now that of rows
-- awaiting a fold), and the planner read that index (a dead entry per past fold) on every remember_many once the
-- inbox was analysed.
WITH written AS (
    INSERT INTO memory_inbox ({inbox_columns}, awaits_fold)
    SELECT {inbox_columns}, %(folds_later)s FROM inbox_stage ORDER BY id
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING idempotency_key
)
SELECT idempotency_key, true FROM written
UNION ALL
SELECT i.idempotency_key, false
FROM memory_inbox i
WHERE %(folds_later)s AND i.idempotency_key = ANY (%(keys)s::text[]) AND coalesce(i.unit_id IS NULL, false);
