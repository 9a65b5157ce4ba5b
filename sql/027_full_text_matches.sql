-- Recall's full-text match through a GIN index of the units' words, for memory_app. Under row-level security the
-- planner makes a predicate an index condition only when its function is leakproof, and ts_match_vq (tsvector @@
-- tsquery) is not, rightly: TS_execute stops early, so a deep query's stack-depth error would say whether a hidden
-- row holds a word (docs/scaling.md item 12). So a reader's full-text leg read every unit of the project and matched
-- each one: O(project) for any query (one rare term at 100,000 units: 24 ms on an Intel Xeon). This function runs as
-- the owner, whose own policy hides nothing, so the index serves the match, and applies memory_app's read_scope
-- policy on memory_units itself (sql/009_read_scopes.sql: the project in the read scope; a private unit only for its
-- persona or an operator of the project, who may forget it), tested row for row against the policy. It builds its
-- query itself from at most 64 plain words OR-ed (vocabulary.TEXT_MATCH_MAX_WORDS: at least a request's 32 terms
-- plus a feedback round's 5), so no caller can give it a query deep enough to fail on some rows and not on others.
-- It returns the columns recall's filters and ranking read. Its search_path names pg_temp last and it names the
-- table and every function by its schema: otherwise a session's temporary view called memory_units would be read in
-- its place, as the owner (an attacker's review found that, and the same hole in the SECURITY DEFINER triggers,
-- which get the same path at the end of this file), and where a role may create in public (PostgreSQL 14 and older)
-- a public.cardinality(text[]) would be a closer match than pg_catalog's cardinality(anyarray) and run as the owner
-- (so CREATE there is revoked too).
-- Planned for every call (EXECUTE): a plan made for any project guesses it small and reads it by its key.
-- The index it reads: each unit's lexemes under its project and audience, so a word's entry holds only units one
-- kind of reader may see: a shared unit's 'acme/kettl'; a private unit's 'acme/@ kettl' (its project's operators)
-- and 'acme/@ana kettl' for each persona of private_to (a space ends the persona: no lexeme holds one, and no
-- project a '/'). On the plain index of tsv (which no reader's plan could use: it is dropped) a word held by 30,000
-- units of another project made a reader's request 1.2 -> 6 ms (each of them fetched, then filtered out): how often
-- a word occurs where the reader may not look showed in its timing (the second attacker's review). The entries carry
-- no positions or weights: they only find the units, which are matched again on tsv itself.
CREATE OR REPLACE FUNCTION memory_private_entries(project text, private_to text[], tsv tsvector) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT pg_catalog.array_to_tsvector(ARRAY(
       SELECT audience OPERATOR(pg_catalog.||) lexeme
       FROM pg_catalog.unnest(pg_catalog.tsvector_to_array(tsv)) AS lexeme,
            pg_catalog.unnest(ARRAY[project OPERATOR(pg_catalog.||) '/@ '] OPERATOR(pg_catalog.||) ARRAY(
                SELECT project OPERATOR(pg_catalog.||) '/@' OPERATOR(pg_catalog.||) persona OPERATOR(pg_catalog.||) ' '
                FROM pg_catalog.unnest(private_to) AS persona
                WHERE persona IS NOT NULL)) AS audience)) $$;  -- as the policy: a NULL persona is no reader
-- A shared unit's entries (most units) in string functions: a body holding a subquery, made ready again for each
-- write, cost remember() 0.94x against 0.955x; its lexemes hold no space, so a space joins and parts them.
CREATE OR REPLACE FUNCTION memory_unit_entries(project text, private_to text[], tsv tsvector) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT CASE WHEN private_to IS NOT NULL THEN public.memory_private_entries(project, private_to, tsv)
               WHEN pg_catalog.length(tsv) = 0 THEN tsv
               ELSE pg_catalog.array_to_tsvector(pg_catalog.string_to_array(
                   project OPERATOR(pg_catalog.||) '/' OPERATOR(pg_catalog.||) pg_catalog.array_to_string(
                       pg_catalog.tsvector_to_array(tsv),
                       ' ' OPERATOR(pg_catalog.||) project OPERATOR(pg_catalog.||) '/'),
                   ' ')) END $$;
CREATE INDEX IF NOT EXISTS memory_units_entries ON memory_units
    USING gin (public.memory_unit_entries(project, private_to, tsv));
DROP INDEX IF EXISTS memory_units_tsv;

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
         WHERE public.memory_unit_entries(u.project, u.private_to, u.tsv) @@ $5 AND u.project = $1 AND u.tsv @@ $2
           AND (u.private_to IS NULL OR $3 = ANY (u.private_to) OR $4)'  -- read_scope: a private unit's audience
        USING match_project, matching, reader_persona, project_operator, visible;
END $$;
REVOKE ALL ON FUNCTION memory_text_matches(text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memory_text_matches(text, text[]) TO memory_app;
-- PostgreSQL 15's default, for a database made before it: only the schema's owner and the migrating role create
-- objects in public (each a warning, not an error, where the migrating role may not grant it: it then keeps creating
-- through PUBLIC, as before)
GRANT CREATE ON SCHEMA public TO CURRENT_USER;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;

-- Every SECURITY DEFINER function of the schema (the triggers that write the journal, the marks, the canon's
-- version, the vectors' deletion) searches pg_catalog, then public, then the session's temporary schema: with
-- search_path = public alone a writer's temporary table named like the table a trigger writes (memory_changes) took
-- its rows, and a trigger on it ran the writer's code as the owner.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid FROM pg_proc p
             WHERE p.pronamespace = 'public'::regnamespace AND p.prosecdef AND pg_has_role(p.proowner, 'USAGE')
               AND NOT EXISTS (SELECT 1 FROM pg_depend d  -- the project's own, not an extension's
                               WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, public, pg_temp', f);
    END LOOP;
END $$;
