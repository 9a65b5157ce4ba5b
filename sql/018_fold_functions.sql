-- The fold as server-side functions. remember() sent eight statements per write in one pipeline (~80 us of
-- psycopg's client time each, ~1.3 ms of server time with the commit); as one function call it is one statement
-- whose plans the server keeps per session (~0.9 ms with the commit). memory_fold is the one fold: the ledger asset
-- and remember_many call it for a day's or a batch's keys, memory_remember for one captured candidate.
-- The statuses, outcomes, visibilities and column lists below are the vocabulary's (memory_assets/vocabulary.py);
-- tests/ledger/test_capture.py reads these definitions back and checks them against it.

-- Fold the unfolded inbox rows with the idempotency keys fold_keys into the ledger: new content becomes units
-- numbered after the project's counter, every row becomes a source of the live unit with its content, and content
-- that was forgotten is never inserted again (its rows are linked to the tombstone, their text blanked). Returns
-- how many projects were folded, units inserted, sources linked and rows buried. Generic plans, made
-- without sequential scans: a session keeps its plans of this function until the next ANALYZE, whichever caller
-- made them (remember() and a bulk fold share them on a pooled connection), and plans made on small tables would
-- read whole tables on every write once they grew; every statement here selects by key or id, so an index plan is
-- right for one key and for a day's.
CREATE OR REPLACE FUNCTION memory_fold(fold_keys text[], fold_trust real, OUT projects_folded integer,
                                       OUT units_inserted bigint, OUT sources_linked bigint, OUT rows_buried bigint)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    fold_projects text[];
BEGIN
    -- "Unfolded" is spelled coalesce(unit_id IS NULL, false) so that no plan can use the partial index of unfolded
    -- rows (memory_inbox_unfolded_day): each fold leaves a dead entry there until vacuum, and a plan that filtered
    -- the keys over it slowed every remember() with the store's write history (16 ms at 30k units written).
    SELECT coalesce(array_agg(DISTINCT i.project ORDER BY i.project), '{}') INTO fold_projects
    FROM memory_inbox i
    WHERE coalesce(i.unit_id IS NULL, false) AND i.idempotency_key = ANY (fold_keys);
    projects_folded := cardinality(fold_projects);
    IF projects_folded = 0 THEN
        units_inserted := 0; sources_linked := 0; rows_buried := 0;
        RETURN;
    END IF;
    -- every new project gets its counter row (unit numbers start after last_number); then the counter rows are
    -- locked to commit, in name order so concurrent folds never deadlock: numbers stay gap-free. Each statement
    -- below folds only rows of these projects: a row of another project captured meanwhile waits for its own fold.
    INSERT INTO memory_projects (project) SELECT unnest(fold_projects) ON CONFLICT (project) DO NOTHING;
    PERFORM 1 FROM memory_projects WHERE project = ANY (fold_projects) ORDER BY project FOR UPDATE;

    -- The two content probes (an OR of the statuses scanned the whole project) are subplans run per inbox row with
    -- the row's key as their index condition: OFFSET 0 keeps them from becoming anti-joins, which a plan made on
    -- small tables ran as one read of every live (and every forgotten) unit of the store per write.
    WITH cand AS (
        SELECT DISTINCT ON (i.project, i.kind, i.content_hash) i.*
        FROM memory_inbox i
        WHERE coalesce(i.unit_id IS NULL, false) AND i.idempotency_key = ANY (fold_keys)
          AND i.project = ANY (fold_projects)
          AND NOT EXISTS (
              SELECT 1 FROM memory_units u
              WHERE u.project = i.project AND u.kind = i.kind AND u.content_hash = i.content_hash
                AND u.status IN ('proposed', 'review', 'active', 'flagged', 'stale')
              OFFSET 0)
          AND NOT EXISTS (
              SELECT 1 FROM memory_units u
              WHERE u.project = i.project AND u.kind = i.kind AND u.content_hash = i.content_hash
                AND u.status = 'forgotten'
              OFFSET 0)
        ORDER BY i.project, i.kind, i.content_hash, i.id
    ), numbered AS (
        SELECT c.*, p.last_number + row_number() OVER (PARTITION BY c.project ORDER BY c.id) AS number
        FROM cand c JOIN memory_projects p USING (project)
    ), inserted AS (
        INSERT INTO memory_units (project, number, type, kind, title, body, paths, keywords, status, confidence,
                                  importance, trust, content_hash, valid_from, origin_inbox_id, created_by,
                                  created_at, updated_by, updated_at, private_to)
        SELECT project, number, type, kind, title, body, paths, keywords, status, confidence,
               importance, fold_trust, content_hash, coalesce(valid_from, received_at), id,
               coalesce(persona, feed), received_at, coalesce(persona, feed), received_at,
               CASE WHEN visibility = 'private' THEN ARRAY[persona] END
        FROM numbered
        ON CONFLICT (project, kind, content_hash) WHERE status IN ('proposed', 'review', 'active', 'flagged', 'stale')
        DO NOTHING
        RETURNING id, project, number
    ), counters AS (
        UPDATE memory_projects p SET last_number = m.top
        FROM (SELECT project, max(number) AS top FROM inserted GROUP BY project) m
        WHERE p.project = m.project
        RETURNING p.project
    )
    INSERT INTO audit_log (actor, action, project, unit_id, reason, details)
    SELECT 'ledger', 'insert', project, id, NULL, jsonb_build_object('token', 'mem-' || number)
    FROM inserted;
    GET DIAGNOSTICS units_inserted = ROW_COUNT;

    -- each unfolded row points at the live unit holding its content and becomes that unit's source (one source
    -- per unit and task: a replayed task adds nothing)
    WITH linked AS (
        UPDATE memory_inbox i
        SET unit_id = u.id,
            folded_at = now(),
            outcome = CASE WHEN u.origin_inbox_id = i.id THEN 'inserted' ELSE 'duplicate' END
        FROM memory_units u
        WHERE coalesce(i.unit_id IS NULL, false) AND i.idempotency_key = ANY (fold_keys)
          AND i.project = ANY (fold_projects)
          AND u.project = i.project AND u.kind = i.kind AND u.content_hash = i.content_hash
          AND u.status IN ('proposed', 'review', 'active', 'flagged', 'stale')
        RETURNING i.*
    )
    INSERT INTO memory_sources (unit_id, project, feed, task_id, session_id, persona, model, observed_sha, source_ref,
                                visibility, inbox_id, created_at)
    SELECT unit_id, project, feed, task_id, session_id, persona, model, observed_sha, source_ref, visibility, id,
           received_at
    FROM linked
    ORDER BY id
    ON CONFLICT (unit_id, task_id) DO NOTHING;
    GET DIAGNOSTICS sources_linked = ROW_COUNT;

    -- rows whose content was forgotten in their project: linked to the tombstone, their text blanked at once
    UPDATE memory_inbox i
    SET unit_id = u.id, folded_at = now(), outcome = 'forgotten', title = '', body = '', paths = '{}',
        keywords = '{}'
    FROM memory_units u
    WHERE coalesce(i.unit_id IS NULL, false) AND i.idempotency_key = ANY (fold_keys)
      AND i.project = ANY (fold_projects)
      AND u.project = i.project AND u.kind = i.kind AND u.content_hash = i.content_hash
      AND u.status = 'forgotten';
    GET DIAGNOSTICS rows_buried = ROW_COUNT;
END $$;

-- Capture one gated candidate (a JSON object of the inbox columns; a replayed idempotency key is a no-op), fold it,
-- and say what became of it: its inbox outcome, its unit's id, number and status, and whether it was folded before
-- this transaction (a replay: the row's version is not this transaction's). Planned as memory_fold is.
CREATE OR REPLACE FUNCTION memory_remember(candidate jsonb, fold_trust real)
RETURNS TABLE (outcome text, unit_id uuid, number bigint, status text, replayed boolean)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
#variable_conflict use_column
BEGIN
    INSERT INTO memory_inbox (idempotency_key, project, kind, type, title, body, paths, keywords, confidence,
                              importance, valid_from, feed, task_id, session_id, persona, model, observed_sha,
                              source_ref, visibility, status, content_hash)
    SELECT idempotency_key, project, kind, type, title, body, paths, keywords, confidence, importance, valid_from,
           feed, task_id, session_id, persona, model, observed_sha, source_ref, visibility, status, content_hash
    FROM jsonb_populate_record(NULL::memory_inbox, candidate)
    ON CONFLICT (idempotency_key) DO NOTHING;
    PERFORM memory_fold(ARRAY[candidate ->> 'idempotency_key'], fold_trust);
    RETURN QUERY
        SELECT i.outcome, i.unit_id, u.number, u.status, i.xmin <> pg_current_xact_id()::xid
        FROM memory_inbox i
        JOIN memory_units u ON u.id = i.unit_id
        WHERE i.idempotency_key = candidate ->> 'idempotency_key';
END $$;
