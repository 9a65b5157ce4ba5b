-- The functions the units' full-text entries index (sql/027) and generated tsv column (sql/001) call, compiled once
-- per session instead of parsed for every statement that writes a unit. They were LANGUAGE sql IMMUTABLE bodies
-- calling STABLE functions (array_to_string), which the planner never inlines: yet it parsed and analysed each body
-- again, to try, whenever a statement wrote a unit, then ran it as a SQL function (remember()'s insert: ~10 % of
-- the server's CPU, sampled with perf). PL/pgSQL is never inlined, so the planner does not try, and a session
-- compiles each body once. The bodies are the same expressions, so the index and the column hold what they held
-- (tests/test_database.py reads an index sql/027's bodies built through them).
CREATE OR REPLACE FUNCTION memory_text_of(text[]) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS
$$ BEGIN RETURN coalesce(pg_catalog.array_to_string($1, ' '), ''); END $$;

CREATE OR REPLACE FUNCTION memory_private_entries(project text, private_to text[], tsv tsvector) RETURNS tsvector
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS
$$ BEGIN RETURN pg_catalog.array_to_tsvector(ARRAY(
       SELECT audience OPERATOR(pg_catalog.||) lexeme
       FROM pg_catalog.unnest(pg_catalog.tsvector_to_array(tsv)) AS lexeme,
            pg_catalog.unnest(ARRAY[project OPERATOR(pg_catalog.||) '/@ '] OPERATOR(pg_catalog.||) ARRAY(
                SELECT project OPERATOR(pg_catalog.||) '/@' OPERATOR(pg_catalog.||) persona OPERATOR(pg_catalog.||) ' '
                FROM pg_catalog.unnest(private_to) AS persona
                WHERE persona IS NOT NULL)) AS audience)); END $$;  -- as the policy: a NULL persona is no reader

CREATE OR REPLACE FUNCTION memory_unit_entries(project text, private_to text[], tsv tsvector) RETURNS tsvector
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS
$$ BEGIN RETURN CASE WHEN private_to IS NOT NULL THEN public.memory_private_entries(project, private_to, tsv)
                     WHEN pg_catalog.length(tsv) OPERATOR(pg_catalog.=) 0 THEN tsv
                     ELSE pg_catalog.array_to_tsvector(pg_catalog.string_to_array(
                         project OPERATOR(pg_catalog.||) '/' OPERATOR(pg_catalog.||) pg_catalog.array_to_string(
                             pg_catalog.tsvector_to_array(tsv),
                             ' ' OPERATOR(pg_catalog.||) project OPERATOR(pg_catalog.||) '/'),
                         ' ')) END; END $$;
