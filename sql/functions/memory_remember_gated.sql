-- remember()'s write, one statement: the kill switch and the canon checked, the candidate captured in the inbox and
-- folded into a numbered unit, a duplicate's source, or buried where its content was forgotten. Its history: sql/019,
-- 022, 037, 041, 045, 046, 047 and 049; each change of this file comes with a numbered migration saying why (sql/042).
CREATE OR REPLACE FUNCTION memory_remember_gated(candidate jsonb, fold_trust real, gated_canon uuid)
RETURNS TABLE (outcome text, unit_id uuid, number bigint, status text, replayed boolean)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
#variable_conflict use_column
DECLARE
    killed boolean;
    canon_now uuid;
    row_id bigint;
    row_project text;
    row_kind text;
    row_hash text;
    top bigint;
    forgets boolean;
    found_id uuid;
    found_number bigint;
    found_status text;
    became text;
BEGIN
    SELECT coalesce((SELECT ks.value = 'on' FROM memory_switch ks WHERE ks.scope = 'kill' AND ks.key = ''), false),
           (SELECT p.canon_version FROM memory_projects p WHERE p.project = candidate ->> 'project')
    INTO killed, canon_now;
    IF killed THEN
        RETURN QUERY SELECT 'killed'::text, NULL::uuid, NULL::bigint, NULL::text, false;
        RETURN;
    ELSIF canon_now IS DISTINCT FROM gated_canon THEN
        RETURN QUERY SELECT 'canon_changed'::text, NULL::uuid, NULL::bigint, NULL::text, false;
        RETURN;
    END IF;

    -- captured before any lock is taken, as remember_many captures before its fold locks: a write never waits for
    -- a key while holding a counter row; captured as awaiting no fold, since this statement folds it (sql/045): the
    -- partial index of rows awaiting one gets no entry, and the link below changes no indexed column (a HOT update)
    INSERT INTO memory_inbox (idempotency_key, project, kind, type, title, body, paths, keywords, confidence,
                              importance, valid_from, feed, task_id, session_id, persona, model, observed_sha,
                              source_ref, visibility, status, content_hash, awaits_fold)
    SELECT idempotency_key, project, kind, type, title, body, paths, keywords, confidence, importance, valid_from,
           feed, task_id, session_id, persona, model, observed_sha, source_ref, visibility, status, content_hash,
           false
    FROM jsonb_populate_record(NULL::memory_inbox, candidate)
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id, project, kind, content_hash INTO row_id, row_project, row_kind, row_hash;
    IF row_id IS NULL THEN  -- a replayed key: what became of it (folded now if it was captured unfolded)
        PERFORM memory_fold(ARRAY[candidate ->> 'idempotency_key'], fold_trust);
        RETURN QUERY
            SELECT i.outcome, i.unit_id, u.number, u.status, i.xmin <> pg_current_xact_id()::xid
            FROM memory_inbox i
            JOIN memory_units u ON u.id = i.unit_id
            WHERE i.idempotency_key = candidate ->> 'idempotency_key';
        IF memory_writes_killed() THEN  -- read again under the switch's lock, after every wait (sql/049)
            RAISE EXCEPTION 'memory is off (the kill switch)' USING ERRCODE = 'MAKIL';
        END IF;
        RETURN;
    END IF;

    -- the project's counter row, locked to commit: every fold of the project waits here, so the probes below stay
    -- true until this transaction commits and unit numbers stay gap-free; locked, never updated (sql/047)
    SELECT p.holds_forgotten INTO forgets
    FROM memory_projects p WHERE p.project = row_project FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO memory_projects (project) VALUES (row_project) ON CONFLICT (project) DO NOTHING;
        SELECT p.holds_forgotten INTO forgets
        FROM memory_projects p WHERE p.project = row_project FOR UPDATE;
    END IF;

    SELECT u.id, u.number, u.status INTO found_id, found_number, found_status
    FROM memory_units u
    WHERE u.project = row_project AND u.kind = row_kind AND u.content_hash = row_hash
      AND u.status IN ('proposed', 'review', 'active', 'flagged', 'stale');
    became := CASE WHEN FOUND THEN 'duplicate' END;
    IF became IS NULL AND forgets THEN
        SELECT f.unit_id, f.number, 'forgotten' INTO found_id, found_number, found_status
        FROM memory_forgotten_contents f
        WHERE f.project = row_project AND f.kind = row_kind AND f.content_hash = row_hash
        ORDER BY f.number
        LIMIT 1;
        became := CASE WHEN FOUND THEN 'forgotten' END;
    END IF;
    IF became IS NULL THEN
        top := coalesce(memory_last_number(row_project), 0);  -- read under the lock: every earlier unit committed
        INSERT INTO memory_units (project, number, type, kind, title, body, paths, keywords, status, confidence,
                                  importance, trust, content_hash, valid_from, origin_inbox_id, created_by,
                                  created_at, updated_by, updated_at, private_to,
                                  origin_session_id, origin_persona, origin_visibility, sources_beyond_origin)
        SELECT project, number, type, kind, title, body, paths, keywords, status, confidence,
               importance, fold_trust, content_hash, coalesce(valid_from, received_at), id,
               coalesce(persona, feed), received_at, coalesce(persona, feed), received_at,
               CASE WHEN visibility = 'private' THEN ARRAY[persona] END,
               session_id, persona, visibility, false
        FROM (SELECT i.*, top + 1 AS number FROM memory_inbox i WHERE i.id = row_id) AS numbered
        ON CONFLICT (project, kind, content_hash) WHERE status IN ('proposed', 'review', 'active', 'flagged', 'stale')
        DO NOTHING
        RETURNING id, number, status INTO found_id, found_number, found_status;
        IF FOUND THEN
            INSERT INTO audit_log (actor, action, project, unit_id, reason, details)
            VALUES ('ledger', 'insert', row_project, found_id, NULL,
                    jsonb_build_object('token', 'mem-' || found_number));
            became := 'inserted';
        ELSE  -- a write that holds no counter row made the content live meanwhile (a summary revived): link to it
            SELECT u.id, u.number, u.status INTO found_id, found_number, found_status
            FROM memory_units u
            WHERE u.project = row_project AND u.kind = row_kind AND u.content_hash = row_hash
              AND u.status IN ('proposed', 'review', 'active', 'flagged', 'stale');
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
    IF memory_writes_killed() THEN  -- read again under the switch's lock, after every wait (sql/049)
        RAISE EXCEPTION 'memory is off (the kill switch)' USING ERRCODE = 'MAKIL';
    END IF;
    RETURN QUERY SELECT became, found_id, found_number, found_status, false;
END $$;
