-- UTC creation days that hold units to embed: the partitions a backfill must cover.
SELECT DISTINCT (u.created_at AT TIME ZONE 'UTC')::date
FROM memory_units u
WHERE {embeddings/_embeddable}
ORDER BY 1;
