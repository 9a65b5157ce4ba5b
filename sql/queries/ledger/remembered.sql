-- What became of one captured candidate: its inbox outcome and the unit it folded into.
SELECT i.outcome, i.unit_id, u.number, u.status
FROM memory_inbox i
JOIN memory_units u ON u.id = i.unit_id
WHERE i.id = %(inbox_id)s;
