-- Rejections counted between two UTC days (inclusive), by reason.
SELECT reason, sum(count)::bigint
FROM memory_rejections
WHERE day BETWEEN %(first)s AND %(last)s
GROUP BY reason;
