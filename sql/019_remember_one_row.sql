-- remember() folds one row, so memory_remember now folds it with single-row statements: the project's counter row
-- locked, two probes by the whole content key, the unit inserted from the inbox row read by its id, and the row
-- linked by its id. The set-based memory_fold (a day's or a batch's keys: grouping, numbering by row_number(), every
-- row joined to the units) cost ~0.15 ms more of a ~0.75 ms write, a fifth of remember() (docs/scaling.md). A key
-- replayed, or captured unfolded by remember_many without its fold, still goes through memory_fold. The unit's and
-- the source's columns are memory_fold's, spelled the same; tests/ledger/test_capture.py reads both definitions
-- back and checks them against each other and the vocabulary. Planned as memory_fold is (sql/018 says why).
CREATE OR REPLACE FUNCTION memory_remember(candidate jsonb, fold_trust real)
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
BEGIN
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
    -- true until this transaction commits and unit numbers stay gap-free
    INSERT INTO memory_projects (project) VALUES (row_project) ON CONFLICT (project) DO NOTHING;
    SELECT p.last_number INTO top FROM memory_projects p WHERE p.project = row_project FOR UPDATE;

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
