-- Each unit's latest decay score.
SELECT DISTINCT ON (unit_id) day, project, recency, activation, trust, expired, stale, score
FROM decay_scores
ORDER BY unit_id, day DESC;
