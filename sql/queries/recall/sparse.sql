-- Sparse leg. PostgreSQL's ts_rank ignores how rare a word is, so a query's common words (a speaker's name,
-- "project") drown its rare ones: each match is scored by the IDF of the query terms it contains (BM25's idf, no
-- length normalisation), ties broken by ts_rank. Document frequencies are counted per project over the units that
-- contain any query term (read once, then each term tested on those rows only); N (%(units)s) is the project size.
WITH matched AS MATERIALIZED (
    SELECT u.id, u.tsv, u.number, u.type = 'episodic' AS episodic, ({recall/_unit_filters}) AS recallable
    FROM memory_units u
    WHERE u.project = %(project)s AND u.tsv @@ to_tsquery('english', %(tsquery)s)
), terms AS MATERIALIZED (
    SELECT q.query, ln(1 + (%(units)s::float8 - count(m.id) + 0.5) / (count(m.id) + 0.5)) AS idf
    FROM unnest(%(terms)s::text[]) AS t(term)
    CROSS JOIN LATERAL to_tsquery('english', t.term) AS q(query)
    LEFT JOIN matched m ON m.tsv @@ q.query
    GROUP BY q.query
)
SELECT m.id::text AS unit_id, (SELECT sum(t.idf) FROM terms t WHERE m.tsv @@ t.query) AS score, m.episodic
FROM matched m, to_tsquery('english', %(tsquery)s) AS q
WHERE m.recallable
ORDER BY score DESC, ts_rank(m.tsv, q) DESC, m.number
LIMIT %(candidates)s;
