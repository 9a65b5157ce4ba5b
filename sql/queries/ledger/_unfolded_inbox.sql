-- Fragment: the unfolded inbox rows (alias i) with the idempotency keys %(keys)s: one indexed condition, so the
-- prepared generic plan reads only those rows however large the inbox (ledger.capture.fold reads a day's keys).
i.unit_id IS NULL
  AND i.idempotency_key = ANY (%(keys)s::text[])
