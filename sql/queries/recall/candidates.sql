-- Every candidate of a recall and what scoring reads of it, in one statement (one plan, one round trip): the dense
-- leg (recall/_dense_leg), the IDF-scored sparse leg, the turns next to every episodic candidate among each leg's
-- top %(seed_rank)s (the caller's seeds come from those and keep the turns that share a session; where the statement
-- details every unit, the caller works them out), and each unit's number, importance, trust, validity, the personas,
-- first session and sessions of the sources its reader may see, recency and version. {dim} and {model} are the
-- model the query vector was encoded for, composed per model so the partial index predicate matches. The first row
-- is the request's context alone (the serving model, the project size, the (unit, term) pairs the sparse leg read,
-- the snapshot, whether it details every unit), then a row per unit with those five NULL: repeated on each of a small
-- project's ~660 rows they took ~0.2 of the statement's time, sent and parsed. Each leg applies every filter before
-- its LIMIT; row-level security applies to every table read.
WITH {recall/_dense_leg}, tsq AS MATERIALIZED (  -- parsed once: a generic plan would parse it again for every row
    SELECT to_tsquery('english', %(tsquery)s) AS query
), matched AS MATERIALIZED (  -- under %(text_index_min)s units: the project's units matching the query, read by the
                              -- project's key (row-level security keeps a reader's plan off the GIN index)
    SELECT u.id, u.tsv, u.number, u.type = 'episodic' AS episodic, ({recall/_unit_filters}) AS recallable,
           ts_rank(u.tsv, (SELECT query FROM tsq)) AS tsrank
    FROM memory_units u
    WHERE u.project = %(project)s AND u.tsv @@ (SELECT query FROM tsq) AND %(sparse)s::boolean
      AND (SELECT c.units < %(text_index_min)s FROM ctx c)
), queries AS MATERIALIZED (  -- the query's distinct terms as parsed (two words may stem alike), each numbered, with
                              -- its first word
    SELECT min(t.ord) AS term, q.query, (array_agg(t.word ORDER BY t.ord))[1] AS word
    FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS t(word, ord)
    CROSS JOIN LATERAL to_tsquery('english', t.word) AS q(query)
    GROUP BY q.query
), counts AS MATERIALIZED (  -- from %(text_index_min)s units: each term's units this reader may see, counted in the
                             -- owner's GIN index (memory_text_counts, sql/031), once (the inner side of a join, the
                             -- function ran again for every term)
    SELECT n.word, n.matches FROM memory_text_counts(%(project)s, ARRAY(SELECT word FROM queries)) AS n
    WHERE %(sparse)s::boolean AND (SELECT c.units >= %(text_index_min)s FROM ctx c) AND n.matches > 0
), counted AS MATERIALIZED (  -- and its idf
    SELECT q.term, q.word, n.matches,
           ln(1 + ((SELECT greatest(c.units, 1) FROM ctx c)::float8 - n.matches + 0.5) / (n.matches + 0.5)) AS idf
    FROM counts n JOIN queries q ON q.word = n.word
), ordered AS MATERIALIZED (  -- rarest first: the units counted up to each term and the idf of the terms after it
    SELECT c.term, c.word, c.idf, row_number() OVER w AS place, sum(c.matches) OVER w AS reach,
           coalesce(sum(c.idf) OVER (ORDER BY c.matches, c.term ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING), 0)
           AS rest
    FROM counted c WINDOW w AS (ORDER BY c.matches, c.term ROWS UNBOUNDED PRECEDING)
), essential AS MATERIALIZED (  -- the rarest terms up to the first that holds the leg's candidates with the ones
                                -- before it and alone outscores every term after it (MaxScore, sql/031): a unit
                                -- holding none of them scores below every unit holding one
    SELECT o.word FROM ordered o
    WHERE o.place <= coalesce((SELECT min(place) FROM ordered WHERE reach >= %(candidates)s AND idf > rest * 1.000001),
                              (SELECT max(place) FROM ordered))
), essential_hits AS MATERIALIZED (  -- each (unit holding an essential term, term) pair, ranked by the whole query
    SELECT q.term, u.id, u.number, u.type = 'episodic' AS episodic, ({recall/_unit_filters}) AS recallable, u.tsrank
    FROM memory_text_matches(%(project)s, %(terms)s::text[], ARRAY(SELECT word FROM essential)) AS u
    JOIN queries q ON u.tsv @@ q.query
    WHERE %(sparse)s::boolean AND (SELECT c.units >= %(text_index_min)s FROM ctx c)
), pruned AS MATERIALIZED (  -- the essential terms' units hold the leg's top: no other term, or at least the leg's
                             -- candidates recallable among them (each scores above any unit of the other terms)
    SELECT (SELECT count(*) FROM ordered) = (SELECT count(*) FROM essential)
           OR (SELECT count(DISTINCT h.id) FROM essential_hits h WHERE h.recallable) >= %(candidates)s AS holds
), hits AS MATERIALIZED (  -- each (matching unit, term) pair, matched once: the idf counts them, the score sums them,
                            -- and they carry what the leg ranks by (a join back to matched rescans it per unit); from
                            -- %(text_index_min)s units the owner's match through the GIN index finds the units, which
                            -- applies the read policy itself (memory_text_matches, sql/027), joined here without a
                            -- second copy of its rows: the essential terms' units, or every term's where they fall
                            -- short
    SELECT q.term, m.id, m.number, m.episodic, m.recallable, m.tsrank
    FROM matched m JOIN queries q ON m.tsv @@ q.query
    UNION ALL
    SELECT * FROM essential_hits WHERE (SELECT holds FROM pruned)
    UNION ALL
    SELECT q.term, u.id, u.number, u.type = 'episodic', ({recall/_unit_filters}), u.tsrank
    FROM memory_text_matches(%(project)s, %(terms)s::text[], %(terms)s::text[]) AS u JOIN queries q ON u.tsv @@ q.query
    WHERE %(sparse)s::boolean AND (SELECT c.units >= %(text_index_min)s FROM ctx c) AND NOT (SELECT holds FROM pruned)
), terms AS MATERIALIZED (  -- BM25's idf per query term: counted over the project's matching units under
                            -- %(text_index_min)s units, in the index from there (all of them, not only those read)
    SELECT h.term, ln(1 + ((SELECT greatest(c.units, 1) FROM ctx c)::float8 - count(*) + 0.5) / (count(*) + 0.5))
           AS idf
    FROM hits h WHERE (SELECT c.units < %(text_index_min)s FROM ctx c) GROUP BY h.term
    UNION ALL
    SELECT term, idf FROM counted
), sparse AS MATERIALIZED (
    SELECT s.id AS unit_id, s.score, s.episodic, row_number() OVER (ORDER BY s.score DESC, s.tsrank DESC, s.number)
           AS rank
    FROM (SELECT h.id, h.number, h.episodic, sum(t.idf ORDER BY t.term) AS score, h.tsrank
          FROM hits h JOIN terms t ON t.term = h.term
          WHERE h.recallable
          GROUP BY h.id, h.number, h.episodic, h.tsrank  -- one unit's: the same on each of its pairs
          ORDER BY score DESC, h.tsrank DESC, h.number
          LIMIT %(candidates)s) AS s
), seedable AS MATERIALIZED (  -- the candidates that may seed the neighbour spread
    SELECT unit_id FROM dense WHERE rank <= %(seed_rank)s UNION SELECT unit_id FROM sparse WHERE rank <= %(seed_rank)s
), detailed AS NOT MATERIALIZED (  -- whether the project has at most %(all_details_max)s numbered units, and
                                   -- whether this statement therefore details every unit recall may return
                                   -- (%(all_details)s, on the exact path, whose vectors recall/dense_vectors sorts
                                   -- all): one definition for `near`, `latest`, `pooled` and the caller (the last
                                   -- column); inlined where each reads it, as the expressions were
    SELECT c.units <= %(all_details_max)s AS small,
           %(all_details)s::boolean AND c.units <= %(all_details_max)s AND c.units < %(hnsw_min)s AS every_unit
    FROM ctx c
), near AS MATERIALIZED (  -- conversation structure: the recallable episodic turns next to a seedable candidate
                           -- (where the statement details every unit, the caller works them out from those details:
                           -- legs.neighbours)
    SELECT c.id AS of_id, n.id AS unit_id, abs(n.number - c.number)::int AS distance
    FROM memory_units c
    CROSS JOIN LATERAL (  -- a range of the (project, number) index per candidate; the LIMIT keeps the planner there
        SELECT u.id, u.number FROM memory_units u
        WHERE u.project = c.project AND u.number BETWEEN c.number - %(window)s AND c.number + %(window)s
          AND u.id <> c.id AND u.type = 'episodic' AND {recall/_unit_filters}
        LIMIT 2 * %(window)s) AS n
    WHERE c.id IN (SELECT unit_id FROM seedable) AND c.type = 'episodic' AND %(window)s > 0
      AND NOT (SELECT d.every_unit FROM detailed d)
), pool AS MATERIALIZED (  -- one row per candidate: its rank and score in each leg, the candidates it neighbours
                           -- (its columns' types are spelled again in the NULLs of pooled's third branch)
    SELECT r.unit_id, max(r.distance) AS distance, max(r.dense_rank) AS dense_rank, max(r.score) AS score,
           max(r.sparse_rank) AS sparse_rank,
           array_agg(r.of_id::text ORDER BY r.of_id) FILTER (WHERE r.of_id IS NOT NULL) AS near_of,
           array_agg(r.turns ORDER BY r.of_id) FILTER (WHERE r.of_id IS NOT NULL) AS near_distance
    FROM (SELECT unit_id, distance, rank AS dense_rank, NULL::float8 AS score, NULL::bigint AS sparse_rank,
                 NULL::uuid AS of_id, NULL::int AS turns FROM dense
          UNION ALL SELECT unit_id, NULL, NULL, score, rank, NULL, NULL FROM sparse
          UNION ALL SELECT unit_id, NULL, NULL, NULL, NULL, of_id, distance FROM near) AS r
    GROUP BY r.unit_id
), latest AS MATERIALIZED (  -- a current request in a project of at most %(all_details_max)s numbered units: each
                             -- unit's recency on the project's latest decay day, read once by (project, day) (a unit
                             -- scored that day has no later score; a probe per unit cost a LoCoMo call 0.15 of its
                             -- time, sql/035)
    SELECT ds.unit_id, ds.recency FROM decay_scores ds
    WHERE ds.project = %(project)s AND NOT %(historical)s::boolean
      AND ds.day = (SELECT max(d.day) FROM decay_scores d WHERE d.project = %(project)s)
      AND (SELECT d.small FROM detailed d)
), pooled AS (  -- the pool with its units' columns: under hnsw_min (the exact path) the project is small and its
                -- units are one range of the project's key (LoCoMo: the statement 0.91x against the scan of the table
                -- a hash join chose, or a probe per candidate); on the HNSW path one probe per candidate whatever the
                -- plan guesses of the project's size (row-level security's scopes make it guess small: with the key,
                -- a plan read all of a 6,000-unit project's units to join ~300 candidates). With %(all_details)s, in
                -- a project of at most %(all_details_max)s numbered units (`detailed`), also every other unit recall
                -- may return, with its columns as the scan reads them, neither grouped nor probed again (the full-text
                -- statement sent before the question is encoded details them all, so the dense statement after the
                -- encode is the nearest vectors alone: legs.py)
    SELECT p.*, {recall/_unit_columns}
    FROM pool p JOIN memory_units u ON u.id = p.unit_id AND u.project = %(project)s
    WHERE (SELECT c.units < %(hnsw_min)s FROM ctx c)
    UNION ALL
    SELECT p.*, {recall/_unit_columns}
    FROM pool p CROSS JOIN LATERAL (SELECT * FROM memory_units u WHERE u.id = p.unit_id LIMIT 1) AS u
    WHERE (SELECT c.units >= %(hnsw_min)s FROM ctx c)
    UNION ALL
    SELECT u.id, NULL::float8, NULL::bigint, NULL::float8, NULL::bigint, NULL::text[], NULL::int[],
           {recall/_unit_columns}
    FROM memory_units u
    WHERE {recall/_unit_filters}
      AND (SELECT d.every_unit FROM detailed d)
      AND NOT EXISTS (SELECT FROM pool p WHERE p.unit_id = u.id)
)
SELECT ctx.model_key, ctx.units, (SELECT count(*) FROM hits) AS text_hits, ctx.snapshot,
       (SELECT d.every_unit FROM detailed d) AS every_unit,
       NULL AS unit_id, NULL AS distance, NULL AS dense_rank, NULL AS score, NULL AS sparse_rank, NULL AS episodic,
       NULL AS number, NULL AS importance, NULL AS trust, NULL AS valid_from, NULL AS personas, NULL AS persona,
       NULL AS session_id, NULL AS recency, NULL AS sessions, NULL AS revision, NULL AS content_hash, NULL AS near_of,
       NULL AS near_distance
FROM ctx
UNION ALL  -- after the context row: an Append runs its branches in order (no parallel workers: request_context)
SELECT NULL, NULL, NULL, NULL, NULL, u.unit_id::text, u.distance,
       u.dense_rank, u.score, u.sparse_rank,
       u.type = 'episodic' AS episodic, u.number, u.importance, u.trust,
       u.valid_from,  -- read as its binary form's microseconds (legs: database.execute_positional's times_as_micros)
       -- personas and session from the sources its reader may see (another persona's private source moves no
       -- rank); turns are neighbours when any of their sources share a session. A unit whose one source is the row
       -- it was folded from carries that source (sql/024); only the others (born so, or marked in sql/025's side
       -- table) read theirs, each subquery run only where its CASE branch is taken (grouping every candidate's
       -- sources: ~1.3 of ~8.4 ms on LoCoMo). The arrays are sent only where the caller cannot tell them from the
       -- texts beside them (legs.unpack: the persona alone, the session alone): a text array costs the client ~3x a
       -- text to parse, two of them ~0.35 of a small project's ~660 rows
       CASE WHEN o.beyond THEN (
                SELECT array_agg(DISTINCT lower(s.persona))
                       FILTER (WHERE {recall/_visible_source} AND s.persona IS NOT NULL)  -- a source names one, or none
                FROM memory_sources s WHERE s.unit_id = u.unit_id) END AS personas,
       CASE WHEN NOT o.beyond
             AND (u.origin_visibility = {visibility_project} OR u.origin_persona = %(reader)s::text)
            THEN lower(u.origin_persona) END AS persona,
       CASE WHEN o.beyond THEN (
                SELECT (array_agg(s.session_id ORDER BY s.id) FILTER (WHERE {recall/_visible_source}))[1]
                FROM memory_sources s WHERE s.unit_id = u.unit_id)
            WHEN u.origin_visibility = {visibility_project} OR u.origin_persona = %(reader)s::text
            THEN u.origin_session_id END AS session_id,
       coalesce(lt.recency, (  -- else its latest decay score by its own probe; as_of recomputes recency instead
                SELECT ds.recency FROM decay_scores ds WHERE ds.unit_id = u.unit_id AND NOT %(historical)s::boolean
                ORDER BY ds.day DESC LIMIT 1)) AS recency,
       -- the sessions of the sources its reader may see (row-level security lets an operator read every source:
       -- the filter is the reader's, as for the personas); NULL where they are its session_id alone, if any: a unit
       -- with one source, its origin, whose session counts only where the reader sees it
       CASE WHEN o.beyond THEN (
                SELECT array_agg(DISTINCT s.session_id)
                       FILTER (WHERE {recall/_visible_source} AND s.session_id IS NOT NULL)
                FROM memory_sources s WHERE s.unit_id = u.unit_id) END AS sessions,
       u.revision, u.content_hash,  -- the version a current vector of the unit was written for (recall/dense_vectors)
       u.near_of, u.near_distance
FROM pooled u
LEFT JOIN memory_units_beyond_origin b  -- the project's marks, read once (329 probes of the key cost 1 ms)
    ON b.project = %(project)s AND b.unit_id = u.unit_id
LEFT JOIN latest lt ON lt.unit_id = u.unit_id
CROSS JOIN LATERAL (  -- whether the unit's sources go beyond the row it was folded from (sql/024, sql/025), once
    SELECT u.sources_beyond_origin OR b.unit_id IS NOT NULL AS beyond) AS o;
