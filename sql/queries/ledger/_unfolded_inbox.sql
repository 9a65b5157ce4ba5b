-- Fragment: the unfolded inbox rows (alias i) with the idempotency keys %(keys)s: one indexed condition, so the
-- prepared generic plan reads only those rows however large the inbox (ledger.capture.fold reads a day's keys).
-- "Unfolded" is spelled so that it cannot use the partial index of unfolded rows (memory_inbox_unfolded_day): each
-- fold leaves a dead entry there until vacuum, and a plan that filtered the keys over it slowed every remember()
-- with the store's write history (16 ms at 30k units written, 3.5 ms fresh); the unique key index stays exact.
coalesce(i.unit_id IS NULL, false)
  AND i.idempotency_key = ANY (%(keys)s::text[])
