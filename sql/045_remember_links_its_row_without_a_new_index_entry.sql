-- remember()'s write links the inbox row it just captured in a HOT update (docs/scaling.md item 50). The partial
-- index of unfolded rows was on `unit_id IS NULL`, so the link, which sets unit_id, could never be HOT: each write
-- added a second heap tuple and three more index entries (its key, its id, its day), and each capture an entry to
-- the partial index that the link made dead at once. The rows that wait for a fold are now flagged: `awaits_fold`,
-- true for a capture that leaves its row to a later fold (remember_many, the import), false for remember()'s, which
-- folds its row in the statement that captures it. The partial index is on the flag, which remember() never
-- changes; every statement that links an inbox row clears it (memory_fold, the burial of forgotten rows at capture,
-- a forget's blanking). The sensor and the daily fold read unfolded rows through it (ledger/unfolded_days,
-- ledger/unfolded_keys).
--
-- Rows stored before this migration read false (the column's first default, no rewrite of the table); the unfolded
-- ones among them are flagged, then captures default to true.
--
-- sql/functions/memory_fold.sql sha256 e152759a757691a2b6417abb9d0cd9149205b20c6f936d64e530b1dda99c3f61
-- sql/functions/memory_remember_gated.sql sha256 972a9ad93776d46efd0849d3813e2e3f90430d45b7226c5d669a92981f730a7f
ALTER TABLE memory_inbox ADD COLUMN IF NOT EXISTS awaits_fold boolean NOT NULL DEFAULT false;
ALTER TABLE memory_inbox ALTER COLUMN awaits_fold SET DEFAULT true;
UPDATE memory_inbox SET awaits_fold = true WHERE unit_id IS NULL AND NOT awaits_fold;

CREATE INDEX IF NOT EXISTS memory_inbox_awaiting_fold
    ON memory_inbox (((received_at AT TIME ZONE 'UTC')::date)) WHERE awaits_fold;
DROP INDEX IF EXISTS memory_inbox_unfolded_day;
