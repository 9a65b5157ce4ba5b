-- The full-text entries of sql/027 without planner statistics, and the owner's match reading them alone.
-- ANALYZE computed the entries of each of its 30,000 sampled units and counted their lexemes: at 136,000 units about
-- 60% of an ANALYZE of memory_units (347 ms; the CLI import ends with one, docs/scaling.md items 1, 11 and 12), 68 of
-- 128 ms at 20,000. With them the planner knew that a query's words were in most of a big project and read the
-- project by its key instead, computing each unit's entries to filter it: 1,370 against 762 ms for nine words every
-- unit of 100,000 holds (interleaved on one store). Without them it estimates each word in 0.5% of the units and reads
-- the index. ANALYZE keeps a column's old statistics when its target drops to 0, so a store that holds them builds the
-- index again (0.61 s at 138,200 units, writes held off meanwhile).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_stats WHERE schemaname = 'public' AND tablename = 'memory_units_entries') THEN
        DROP INDEX public.memory_units_entries;
        CREATE INDEX memory_units_entries ON public.memory_units
            USING gin (public.memory_unit_entries(project, private_to, tsv));
    END IF;
END $$;
ALTER INDEX memory_units_entries ALTER COLUMN 1 SET STATISTICS 0;

-- The match names its project only as a filter the index cannot serve: the entries already hold only the project's
-- units, and the planner AND-ed them with the project's key, reading every unit id of the project for a word in two
-- of them (0.53 against 0.03 ms executing at 5,000 units, 6.3 against 4.8 ms for 30 words). Otherwise as in sql/027.
CREATE OR REPLACE FUNCTION memory_text_matches(match_project text, words text[])
    RETURNS TABLE (id uuid, project text, number bigint, type text, kind text, status text, private_to text[],
                   valid_from timestamptz, valid_until timestamptz, expired_at timestamptz, paths text[],
                   tsrank real, tsv tsvector)
    LANGUAGE plpgsql STABLE PARALLEL RESTRICTED SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
    ROWS 200 AS $$
DECLARE
    matching pg_catalog.tsquery;
    reader_persona text := public.memory_persona();
    project_operator boolean := coalesce(match_project = ANY (public.memory_scope('forget')), false);
    audiences text[];
    visible pg_catalog.tsquery;
BEGIN
    IF words IS NULL OR pg_catalog.cardinality(words) > 64
       OR EXISTS (SELECT 1 FROM pg_catalog.unnest(words) AS w(word) WHERE w.word IS NULL OR w.word !~ '^[a-z0-9]+$')
    THEN
        RAISE EXCEPTION 'memory_text_matches: words must be at most 64 lowercase ASCII letters-or-digits words'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF match_project IS NULL OR pg_catalog.cardinality(words) = 0  -- read_scope: the project in the read scope
       OR NOT coalesce(match_project = ANY (public.memory_scope('read')), false) THEN
        RETURN;
    END IF;
    matching := pg_catalog.to_tsquery('english'::regconfig, pg_catalog.array_to_string(words, ' | '));  -- parsed
    -- once: a parameter, not per row; and every lexeme of the words, OR-ed, in the entries this reader may see
    audiences := ARRAY[match_project OPERATOR(pg_catalog.||) '/'] OPERATOR(pg_catalog.||) CASE
        WHEN project_operator THEN ARRAY[match_project OPERATOR(pg_catalog.||) '/@ ']
        WHEN reader_persona IS NOT NULL THEN ARRAY[match_project OPERATOR(pg_catalog.||) '/@'
                                                   OPERATOR(pg_catalog.||) reader_persona OPERATOR(pg_catalog.||) ' ']
        ELSE '{}'::text[] END;
    visible := (SELECT pg_catalog.string_agg(pg_catalog.quote_literal(audience OPERATOR(pg_catalog.||) lexeme), ' | ')
                FROM pg_catalog.unnest(pg_catalog.tsvector_to_array(
                    pg_catalog.to_tsvector('english'::regconfig, pg_catalog.array_to_string(words, ' ')))) AS lexeme,
                     pg_catalog.unnest(audiences) AS audience)::pg_catalog.tsquery;
    IF visible IS NULL THEN  -- stop words only
        RETURN;
    END IF;
    RETURN QUERY EXECUTE
        'SELECT u.id, u.project, u.number, u.type, u.kind, u.status, u.private_to, u.valid_from, u.valid_until,
                u.expired_at, u.paths, pg_catalog.ts_rank(u.tsv, $2), u.tsv
         FROM public.memory_units u
         WHERE public.memory_unit_entries(u.project, u.private_to, u.tsv) @@ $5
           AND (u.project || '''') = $1 AND u.tsv @@ $2
           AND (u.private_to IS NULL OR $3 = ANY (u.private_to) OR $4)'  -- read_scope: a private unit's audience
        USING match_project, matching, reader_persona, project_operator, visible;
END $$;

