-- Candidate expansion terms: the lexemes of the first round's best hits (%(ids)s) that the query (%(tsquery)s)
-- does not already hold, plain words only, with how many of those hits hold each and how many units of the
-- project do (df, for the IDF; counted under row-level security, so only over what the reader may see). A lexeme
-- of one unit only re-finds that unit: it is left out.
WITH lexemes AS MATERIALIZED (
    SELECT t.lexeme, count(*) AS hits
    FROM memory_units u CROSS JOIN LATERAL unnest(tsvector_to_array(u.tsv)) AS t(lexeme)
    WHERE u.id = ANY (%(ids)s::uuid[]) AND t.lexeme ~ '^[a-z0-9]{2,}$'
      AND t.lexeme <> ALL (tsvector_to_array(to_tsvector('english', replace(%(tsquery)s, '|', ' '))))
    GROUP BY t.lexeme
)
SELECT l.lexeme, l.hits, d.df
FROM lexemes l
CROSS JOIN LATERAL (SELECT count(*) AS df FROM memory_units m
                    WHERE m.project = %(project)s AND m.tsv @@ quote_literal(l.lexeme)::tsquery) AS d
WHERE d.df >= 2;
