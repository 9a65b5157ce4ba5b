-- Candidate expansion terms: the lexemes of the first round's best hits (%(ids)s) that the query (%(tsquery)s)
-- does not already hold, plain words only, with how many of those hits hold each and how many units of the
-- project do (df, for the IDF; counted under row-level security, so only over what the reader may see: by the
-- project's key, each lexeme matched against every unit; counted through the owner's match of sql/027 a common
-- lexeme cost 25 against 4.5 ms at 20,000 units, each matching row copied out of the function). A lexeme of one unit
-- only re-finds that unit: it is left out. So is one that stems again to another (revis -> revi: 106 of LoCoMo's
-- 3,796 lexemes) or to a stop word (own): the round's query stems its words, so such a term would look for other
-- units, or none.
WITH lexemes AS MATERIALIZED (
    SELECT t.lexeme, count(*) AS hits
    FROM memory_units u CROSS JOIN LATERAL unnest(tsvector_to_array(u.tsv)) AS t(lexeme)
    WHERE u.id = ANY (%(ids)s::uuid[]) AND t.lexeme ~ '^[a-z0-9]{2,}$'
      AND t.lexeme <> ALL (tsvector_to_array(to_tsvector('english', replace(%(tsquery)s, '|', ' '))))
      AND to_tsquery('english', t.lexeme) = quote_literal(t.lexeme)::tsquery
    GROUP BY t.lexeme
)
SELECT l.lexeme, l.hits, d.df
FROM lexemes l
CROSS JOIN LATERAL (SELECT count(*) AS df FROM memory_units m
                    WHERE m.project = %(project)s AND m.tsv @@ quote_literal(l.lexeme)::tsquery) AS d
WHERE d.df >= 2;
