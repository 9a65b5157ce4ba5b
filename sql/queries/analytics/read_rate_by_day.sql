-- Daily read rate by kind and arm (tasks that used a unit over tasks it was injected into), for project %(p)s or
-- all projects when it is NULL.
SELECT day, kind, arm, sum(injections) AS injections, sum(reads) AS reads, sum(citations) AS citations,
       sum(follows) AS follows, avg(read_rate) AS read_rate
FROM read_rate_metrics
WHERE %(p)s::text IS NULL OR project = %(p)s::text
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3;
