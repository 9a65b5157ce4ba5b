-- Under row-level security the planner makes a predicate an index condition only when its function is leakproof
-- (otherwise it could run on rows the policy hides before the policy has filtered them). ts_match_vq, the function
-- of tsvector @@ tsquery, is not marked so: for memory_app and memory_reader the GIN index on memory_units.tsv was
-- never used, and recall's sparse leg read every unit of the project and matched each one (14 of 15 ms of a one-term
-- request at 20,000 units; O(project) at any size). It raises no error that depends on its tsvector (a tsvector is
-- checked on input; the only limit it checks is the query's depth, the caller's own argument), so it reveals nothing
-- of a row it is not shown. Only a superuser may mark a function leakproof: elsewhere the migration warns and recall
-- works as before, reading the project's units. The mark lives in the catalog of this cluster: a dump restored into
-- another one loses it (docs/scaling.md).
DO $$
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF;
    ELSE
        RAISE WARNING 'memory-assets: % is not a superuser, so ts_match_vq (tsvector @@ tsquery) stays not leakproof '
                      'and recall''s full-text leg reads every unit of a project instead of the GIN index on tsv',
                      current_user;
    END IF;
END $$;
