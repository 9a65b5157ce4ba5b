-- Days with inbox rows not yet folded, each with its newest inbox id (a run key that changes with new rows): rows
-- older than the grace only, since a writer folds what it captured within a second (remember_many(fold_now=False)
-- then fold_captured), and a fold of the day beside it would only contend for the counter row. Read by the partial
-- index of rows awaiting a fold (sql/045): remember() folds its row in the statement that captures it, so it has none.
SELECT (received_at AT TIME ZONE 'UTC')::date AS day, max(id)
FROM memory_inbox
WHERE awaits_fold AND unit_id IS NULL AND received_at < now() - make_interval(secs => %(grace)s)
GROUP BY 1
ORDER BY 1;
