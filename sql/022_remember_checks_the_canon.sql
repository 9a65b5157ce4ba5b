-- remember() sends the canon version its gates read (memory_projects.canon_version, a new uuid at every change of
-- the project's canon) with the candidate, so the write needs no read before it: the process keeps each project's
-- canon, and memory_remember checks the kill switch and the version in the same statement as the write. A call was
-- two round trips (the switch with the canon, then the write), ~0.15 of ~1.5 ms (docs/scaling.md). A changed canon
-- writes nothing and says so ('canon_changed'); the switch on writes nothing ('killed'). The rest is sql/019's, but
-- that the counter row is made only for a new project.
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

DROP FUNCTION IF EXISTS memory_remember(jsonb, real);
CREATE FUNCTION memory_remember(candidate jsonb, fold_trust real, gated_canon uuid)
RETURNS TABLE (outcome text, unit_id uuid, number bigint, status text, replayed boolean)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
#variable_conflict use_column
DECLARE
    row_id bigint;
    row_project text;
    top bigint;
    found_id uuid;
    found_number bigint;
    found_status text;
    became text;
    killed boolean;
    canon_now uuid;
BEGIN
    -- nothing is written while the kill switch is on (the fragment events/_killed), nor under a canon that
    -- changed since the gates read it: the caller reads it again and gates anew
    SELECT coalesce((SELECT ks.value = 'on' FROM memory_switch ks WHERE ks.scope = 'kill' AND ks.key = ''), false),
           (SELECT p.canon_version FROM memory_projects p WHERE p.project = candidate ->> 'project')
    INTO killed, canon_now;
    IF killed THEN
        RETURN QUERY SELECT 'killed'::text, NULL::uuid, NULL::bigint, NULL::text, false;
        RETURN;
    END IF;
    IF canon_now IS DISTINCT FROM gated_canon THEN
        RETURN QUERY SELECT 'canon_changed'::text, NULL::uuid, NULL::bigint, NULL::text, false;
        RETURN;
    END IF;

    -- captured before any lock is taken, as remember_many captures before its fold locks: a write never waits for
    -- a key while holding a counter row
    INSERT INTO memory_inbox (idempotency_key, project, kind, type, title, body, paths, keywords, confidence,
                              importance, valid_from, feed, task_id, session_id, persona, model, observed_sha,
                              source_ref, visibility, status, content_hash)
    SELECT idempotency_key, project, kind, type, title, body, paths, keywords, confidence, importance, valid_from,
           feed, task_id, session_id, persona, model, observed_sha, source_ref, visibility, status, content_hash
    FROM jsonb_populate_record(NULL::memory_inbox, candidate)
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id, project INTO row_id, row_project;
    IF row_id IS NULL THEN  -- a replayed key: what became of it (folded now if it was captured unfolded)
        PERFORM memory_fold(ARRAY[candidate ->> 'idempotency_key'], fold_trust);
        RETURN QUERY
            SELECT i.outcome, i.unit_id, u.number, u.status, i.xmin <> pg_current_xact_id()::xid
            FROM memory_inbox i
            JOIN memory_units u ON u.id = i.unit_id
            WHERE i.idempotency_key = candidate ->> 'idempotency_key';
        RETURN;
    END IF;

    -- the project's counter row, locked to commit: every fold of the project waits here, so the probes below stay
    -- true until this transaction commits and unit numbers stay gap-free; made first only for a new project (the
    -- insert's conflict check cost ~45 us of a ~0.7 ms write when the row exists)
    SELECT p.last_number INTO top FROM memory_projects p WHERE p.project = row_project FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO memory_projects (project) VALUES (row_project) ON CONFLICT (project) DO NOTHING;
        SELECT p.last_number INTO top FROM memory_projects p WHERE p.project = row_project FOR UPDATE;
    END IF;

    SELECT u.id, u.number, u.status INTO found_id, found_number, found_status
    FROM memory_inbox i
    JOIN memory_units u ON u.project = i.project AND u.kind = i.kind AND u.content_hash = i.content_hash
    WHERE i.id = row_id AND u.status IN ('proposed', 'review', 'active', 'flagged', 'stale');
    became := 'duplicate';
    IF NOT FOUND THEN
        SELECT u.id, u.number, u.status INTO found_id, found_number, found_status
        FROM memory_inbox i
        JOIN memory_units u ON u.project = i.project AND u.kind = i.kind AND u.content_hash = i.content_hash
        WHERE i.id = row_id AND u.status = 'forgotten'
        ORDER BY u.number
        LIMIT 1;
        became := 'forgotten';
    END IF;
    IF NOT FOUND THEN
        INSERT INTO memory_units (project, number, type, kind, title, body, paths, keywords, status, confidence,
                                  importance, trust, content_hash, valid_from, origin_inbox_id, created_by,
                                  created_at, updated_by, updated_at, private_to)
        SELECT project, number, type, kind, title, body, paths, keywords, status, confidence,
               importance, fold_trust, content_hash, coalesce(valid_from, received_at), id,
               coalesce(persona, feed), received_at, coalesce(persona, feed), received_at,
               CASE WHEN visibility = 'private' THEN ARRAY[persona] END
        FROM (SELECT i.*, top + 1 AS number FROM memory_inbox i WHERE i.id = row_id) AS numbered
        ON CONFLICT (project, kind, content_hash) WHERE status IN ('proposed', 'review', 'active', 'flagged', 'stale')
        DO NOTHING
        RETURNING id, number, status INTO found_id, found_number, found_status;
        IF FOUND THEN
            UPDATE memory_projects p SET last_number = found_number WHERE p.project = row_project;
            INSERT INTO audit_log (actor, action, project, unit_id, reason, details)
            VALUES ('ledger', 'insert', row_project, found_id, NULL,
                    jsonb_build_object('token', 'mem-' || found_number));
            became := 'inserted';
        ELSE  -- a write that takes no counter row (a correction) made the content live meanwhile: link to it
            SELECT u.id, u.number, u.status INTO found_id, found_number, found_status
            FROM memory_inbox i
            JOIN memory_units u ON u.project = i.project AND u.kind = i.kind AND u.content_hash = i.content_hash
            WHERE i.id = row_id AND u.status IN ('proposed', 'review', 'active', 'flagged', 'stale');
            became := 'duplicate';
        END IF;
    END IF;

    IF became = 'forgotten' THEN  -- linked to the tombstone, its text blanked at once
        UPDATE memory_inbox i
        SET unit_id = found_id, folded_at = now(), outcome = 'forgotten', title = '', body = '', paths = '{}',
            keywords = '{}'
        WHERE i.id = row_id;
    ELSE  -- linked to the live unit holding its content, and that unit's source (once per unit and task)
        WITH linked AS (
            UPDATE memory_inbox i
            SET unit_id = found_id, folded_at = now(), outcome = became
            WHERE i.id = row_id
            RETURNING i.*
        )
        INSERT INTO memory_sources (unit_id, project, feed, task_id, session_id, persona, model, observed_sha,
                                    source_ref, visibility, inbox_id, created_at)
        SELECT unit_id, project, feed, task_id, session_id, persona, model, observed_sha, source_ref, visibility, id,
               received_at
        FROM linked
        ON CONFLICT (unit_id, task_id) DO NOTHING;
    END IF;
    RETURN QUERY SELECT became, found_id, found_number, found_status, false;
END $$;
