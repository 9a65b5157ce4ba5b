-- The full-text leg of a large project reads the units of its rarest terms only, not of every word of the query.
-- From TEXT_INDEX_MIN_PROJECT_UNITS units the leg read every unit holding any word of the question through the GIN
-- index (sql/027): a word most units hold ("service", "need") made it read, rank and group the whole project, so
-- recall grew with the project whatever else the question asked (the load bench's readers, on a project the writers
-- grew from 2,000 to 9,500 units of one template: 21 -> 60 ms p50 alone; sql/028: 762 ms for nine words every unit of
-- 100,000 holds). The leg's score is BM25's idf summed over the terms a unit holds, so a unit holding only common
-- terms scores at most the sum of their idfs: once enough units hold a rarer term whose idf alone is above that sum,
-- none of those can reach the leg's top (MaxScore). recall/candidates counts each term's units here (the index's
-- posting list and the heap's visibility, no ranking: ~0.3 us a unit), takes the rarest terms up to that point,
-- reads their units here with every word's ts_rank, and falls back to every word's units when fewer than the leg's
-- candidates are recallable among them: the leg's ranks are the same either way (tests/recall/test_search.py).
--
-- The functions run as the owner with the read policy of sql/027 and sql/028 applied by memory_text_audiences; the
-- two-word-list match is the one body, which the one-list match of sql/028 now calls. (030 is not used: a migration
-- of that number was folded into 029 before it shipped, and a development store that applied it records 030.)

-- The words checked as sql/027 checks them, and the audiences (entry prefixes) this reader may see in the project:
-- NULL when the reader has no read scope on it or there are no words. Raises on anything but plain words.
CREATE OR REPLACE FUNCTION memory_text_audiences(match_project text, words text[]) RETURNS text[]
    LANGUAGE plpgsql STABLE PARALLEL RESTRICTED SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    reader_persona text := public.memory_persona();
    project_operator boolean := coalesce(match_project = ANY (public.memory_scope('forget')), false);
BEGIN
    IF words IS NULL OR pg_catalog.cardinality(words) > 64
       OR EXISTS (SELECT 1 FROM pg_catalog.unnest(words) AS w(word) WHERE w.word IS NULL OR w.word !~ '^[a-z0-9]+$')
    THEN
        RAISE EXCEPTION 'memory_text_matches: words must be at most 64 lowercase ASCII letters-or-digits words'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF match_project IS NULL OR pg_catalog.cardinality(words) = 0  -- read_scope: the project in the read scope
       OR NOT coalesce(match_project = ANY (public.memory_scope('read')), false) THEN
        RETURN NULL;
    END IF;
    RETURN ARRAY[match_project OPERATOR(pg_catalog.||) '/'] OPERATOR(pg_catalog.||) CASE
        WHEN project_operator THEN ARRAY[match_project OPERATOR(pg_catalog.||) '/@ ']
        WHEN reader_persona IS NOT NULL THEN ARRAY[match_project OPERATOR(pg_catalog.||) '/@'
                                                   OPERATOR(pg_catalog.||) reader_persona OPERATOR(pg_catalog.||) ' ']
        ELSE '{}'::text[] END;
END $$;
REVOKE ALL ON FUNCTION memory_text_audiences(text, text[]) FROM PUBLIC;

-- Every lexeme of the words under each audience, OR-ed: the entries of the units this reader may see that hold one
-- (NULL for stop words only).
CREATE OR REPLACE FUNCTION memory_text_visible(audiences text[], words text[]) RETURNS pg_catalog.tsquery
    LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, public, pg_temp AS
$$ SELECT pg_catalog.string_agg(pg_catalog.quote_literal(audience OPERATOR(pg_catalog.||) lexeme), ' | ')::tsquery
   FROM pg_catalog.unnest(pg_catalog.tsvector_to_array(
            pg_catalog.to_tsvector('english'::regconfig, pg_catalog.array_to_string(words, ' ')))) AS lexeme,
        pg_catalog.unnest(audiences) AS audience $$;
REVOKE ALL ON FUNCTION memory_text_visible(text[], text[]) FROM PUBLIC;

-- The units this reader may see in the project that hold a word of match_words, each with ts_rank against every
-- word of `words` (the rank the leg breaks ties by is the whole query's, whichever words found the unit).
CREATE OR REPLACE FUNCTION memory_text_matches(match_project text, words text[], match_words text[])
    RETURNS TABLE (id uuid, project text, number bigint, type text, kind text, status text, private_to text[],
                   valid_from timestamptz, valid_until timestamptz, expired_at timestamptz, paths text[],
                   tsrank real, tsv tsvector)
    LANGUAGE plpgsql STABLE PARALLEL RESTRICTED SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
    ROWS 200 AS $$
DECLARE
    audiences text[] := public.memory_text_audiences(match_project, words);
    match_audiences text[] := public.memory_text_audiences(match_project, match_words);
    visible pg_catalog.tsquery;
BEGIN
    IF audiences IS NULL OR match_audiences IS NULL THEN
        RETURN;
    END IF;
    visible := public.memory_text_visible(audiences, match_words);
    IF visible IS NULL THEN  -- stop words only
        RETURN;
    END IF;
    RETURN QUERY EXECUTE
        'SELECT u.id, u.project, u.number, u.type, u.kind, u.status, u.private_to, u.valid_from, u.valid_until,
                u.expired_at, u.paths, pg_catalog.ts_rank(u.tsv, $2), u.tsv
         FROM public.memory_units u
         WHERE public.memory_unit_entries(u.project, u.private_to, u.tsv) @@ $5
           AND (u.project || '''') = $1 AND u.tsv @@ $6
           AND (u.private_to IS NULL OR $3 = ANY (u.private_to) OR $4)'  -- read_scope: a private unit's audience
        USING match_project,
              pg_catalog.to_tsquery('english'::regconfig, pg_catalog.array_to_string(words, ' | ')),
              public.memory_persona(), coalesce(match_project = ANY (public.memory_scope('forget')), false), visible,
              pg_catalog.to_tsquery('english'::regconfig, pg_catalog.array_to_string(match_words, ' | '));
END $$;
REVOKE ALL ON FUNCTION memory_text_matches(text, text[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memory_text_matches(text, text[], text[]) TO memory_app;

-- sql/028's match, every word finding units and ranking them, for callers of that signature (recall calls the
-- three-argument match itself: a SECURITY DEFINER wrapper is one more call, never inlined).
CREATE OR REPLACE FUNCTION memory_text_matches(match_project text, words text[])
    RETURNS TABLE (id uuid, project text, number bigint, type text, kind text, status text, private_to text[],
                   valid_from timestamptz, valid_until timestamptz, expired_at timestamptz, paths text[],
                   tsrank real, tsv tsvector)
    LANGUAGE sql STABLE PARALLEL RESTRICTED SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
    ROWS 200 AS
$$ SELECT * FROM public.memory_text_matches(match_project, words, words) $$;

-- For each word (one per term: two words that stem alike are one term), how many units this reader may see in the
-- project hold it: BM25's document frequency, counted in the GIN index of sql/027 without ranking a unit. A word of
-- one lexeme is an entry of tsv, so its units are not matched again on tsv (detoasting each: 5x the count); a word
-- the parser splits ('1e90ff' is the phrase '1e90' <-> 'ff', as in hex colours and commit hashes) is matched on tsv
-- as the leg matches it, or its count would be of units holding either part (an attacker's review found it).
CREATE OR REPLACE FUNCTION memory_text_counts(match_project text, words text[])
    RETURNS TABLE (word text, matches bigint)
    LANGUAGE plpgsql STABLE PARALLEL RESTRICTED SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
    ROWS 8 AS $$
DECLARE
    audiences text[] := public.memory_text_audiences(match_project, words);
BEGIN
    IF audiences IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE
        'WITH w AS MATERIALIZED (  -- each word''s entries and query made once, not again for every unit counted
             SELECT t.word, public.memory_text_visible($2, ARRAY[t.word]) AS visible, q.matching,
                    pg_catalog.numnode(q.matching) = 1 AS one_lexeme
             FROM pg_catalog.unnest($5) AS t(word),
                  pg_catalog.to_tsquery(''english''::regconfig, t.word) AS q(matching))
         SELECT w.word, (SELECT pg_catalog.count(*) FROM public.memory_units u
                         WHERE public.memory_unit_entries(u.project, u.private_to, u.tsv) @@ w.visible
                           AND (w.one_lexeme OR u.tsv @@ w.matching)
                           AND (u.project || '''') = $1 AND (u.private_to IS NULL OR $3 = ANY (u.private_to) OR $4))
         FROM w WHERE w.visible IS NOT NULL'  -- a stop word holds no entry
        USING match_project, audiences, public.memory_persona(),
              coalesce(match_project = ANY (public.memory_scope('forget')), false), words;
END $$;
REVOKE ALL ON FUNCTION memory_text_counts(text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memory_text_counts(text, text[]) TO memory_app;
