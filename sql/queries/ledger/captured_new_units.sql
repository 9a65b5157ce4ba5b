-- How many of the given captured rows folded into a new unit, whichever fold (this caller's, the inbox sensor's or
-- the daily ledger's) took them.
SELECT count(*) FROM memory_inbox WHERE idempotency_key = ANY (%(keys)s::text[]) AND outcome = {inbox_inserted};
