-- remember() sends the canon version its gates read (memory_projects.canon_version, a new uuid at every change of
-- the project's canon) with the candidate, so the write needs no read before it: the process keeps each project's
-- canon, and memory_remember_gated checks the kill switch and the version in the same statement as the write. A
-- call was two round trips (the switch with the canon, then the write), ~0.15 of ~1.5 ms (docs/scaling.md). A
-- changed canon writes nothing and says so ('canon_changed'); the switch on writes nothing ('killed'); else the
-- candidate goes to sql/019's memory_remember.
ALTER TABLE memory_projects ADD COLUMN IF NOT EXISTS canon_version uuid;  -- NULL: no canon registered yet

-- Every change of a project's canon gives it a new version (its counter row made if need be); a TRUNCATE, every
-- project a new one.
CREATE OR REPLACE FUNCTION memory_canon_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public
AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        UPDATE memory_projects SET canon_version = gen_random_uuid() WHERE canon_version IS NOT NULL;
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        INSERT INTO memory_projects (project, canon_version) VALUES (OLD.project, gen_random_uuid())
        ON CONFLICT (project) DO UPDATE SET canon_version = excluded.canon_version;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO memory_projects (project, canon_version) VALUES (NEW.project, gen_random_uuid())
        ON CONFLICT (project) DO UPDATE SET canon_version = excluded.canon_version;
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS memory_canon_changed ON memory_canon;
CREATE TRIGGER memory_canon_changed AFTER INSERT OR UPDATE OR DELETE ON memory_canon
    FOR EACH ROW EXECUTE FUNCTION memory_canon_changed();
DROP TRIGGER IF EXISTS memory_canon_truncated ON memory_canon;
CREATE TRIGGER memory_canon_truncated AFTER TRUNCATE ON memory_canon
    FOR EACH STATEMENT EXECUTE FUNCTION memory_canon_changed();
UPDATE memory_projects p SET canon_version = gen_random_uuid()
WHERE EXISTS (SELECT 1 FROM memory_canon c WHERE c.project = p.project);
INSERT INTO memory_projects (project, canon_version)
SELECT DISTINCT c.project, gen_random_uuid() FROM memory_canon c
ON CONFLICT (project) DO NOTHING;

-- Nothing is written while the kill switch is on (the fragment events/_killed), nor under a canon that changed since
-- the gates read it (the caller reads it again and gates anew); else sql/019's one-row capture and fold. Planned as
-- memory_remember is: a plan made while memory_projects was small must not read it whole once it grew.
CREATE OR REPLACE FUNCTION memory_remember_gated(candidate jsonb, fold_trust real, gated_canon uuid)
RETURNS TABLE (outcome text, unit_id uuid, number bigint, status text, replayed boolean)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    killed boolean;
    canon_now uuid;
BEGIN
    SELECT coalesce((SELECT ks.value = 'on' FROM memory_switch ks WHERE ks.scope = 'kill' AND ks.key = ''), false),
           (SELECT p.canon_version FROM memory_projects p WHERE p.project = candidate ->> 'project')
    INTO killed, canon_now;
    IF killed THEN
        RETURN QUERY SELECT 'killed'::text, NULL::uuid, NULL::bigint, NULL::text, false;
    ELSIF canon_now IS DISTINCT FROM gated_canon THEN
        RETURN QUERY SELECT 'canon_changed'::text, NULL::uuid, NULL::bigint, NULL::text, false;
    ELSE
        RETURN QUERY SELECT * FROM memory_remember(candidate, fold_trust);
    END IF;
END $$;
