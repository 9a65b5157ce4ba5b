-- The analysts' lab: notebooks log in as memory_reader itself, so no RESET ROLE leads back to the owner, and the
-- read-rate asset keeps per-arm task counts (read_rate_arms) for the arm comparison.

-- memory_reader logs in (it has no password: on a server that asks for one, a DBA sets it; the embedded server
-- trusts its own Unix socket). A role created by someone else stays as it is, with a notice: a DBA grants LOGIN.
DO $$
BEGIN
    IF NOT (SELECT rolcanlogin FROM pg_roles WHERE rolname = 'memory_reader') THEN
        BEGIN
            ALTER ROLE memory_reader LOGIN;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE NOTICE 'memory_reader cannot log in yet: ALTER ROLE memory_reader LOGIN PASSWORD ... as a DBA';
        END;
    END IF;
END $$;

-- One row per arm (memory_task_arms.value, source) and window end: the tasks active in the trailing window (their
-- memory decision or any usage event fell in it), of those the tasks memory was injected into, and the tasks that
-- read, cited or followed a unit. Counts only: no unit, no text.
CREATE TABLE IF NOT EXISTS read_rate_arms (
    day            date NOT NULL,
    arm            text NOT NULL,
    source         text NOT NULL,
    window_days    integer NOT NULL,
    tasks          integer NOT NULL,
    injected_tasks integer NOT NULL,
    used_tasks     integer NOT NULL,
    PRIMARY KEY (day, arm, source)
);

-- As every memory table (sql/009_read_scopes.sql): RLS forced, the owner through its own policy, analysts read all.
DO $$
DECLARE
    owner_role text := (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'read_rate_arms'::regclass);
BEGIN
    ALTER TABLE read_rate_arms ENABLE ROW LEVEL SECURITY;
    ALTER TABLE read_rate_arms FORCE ROW LEVEL SECURITY;
    DROP POLICY IF EXISTS owner_maintenance ON read_rate_arms;
    EXECUTE format('CREATE POLICY owner_maintenance ON read_rate_arms TO %I USING (true) WITH CHECK (true)',
                   owner_role);
    GRANT SELECT ON read_rate_arms TO memory_reader;
    DROP POLICY IF EXISTS analyst_read ON read_rate_arms;
    CREATE POLICY analyst_read ON read_rate_arms FOR SELECT TO memory_reader USING (true);
END $$;
