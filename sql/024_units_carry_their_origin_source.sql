-- Each unit carries its origin source (the inbox row it was folded from: session, persona, visibility) and whether
-- it has any source beyond that one (sources_beyond_origin, true unless the fold says otherwise), so recall reads
-- memory_sources only for the units that have more: grouping the ~300 candidates' sources per request was ~1.3 of
-- ~8.4 ms of the candidates statement on LoCoMo (docs/scaling.md item 11). Conservative by construction: a unit is
-- born false only in the two fold functions below, from the row that becomes its first source, and any source
-- added to it later (a duplicate from another task, a merge, a summary's members), changed or deleted makes it
-- true for good (memory_sources_audience, memory_sources_changed); true means "read the sources", always right.
ALTER TABLE memory_units
    ADD COLUMN IF NOT EXISTS origin_session_id text,
    ADD COLUMN IF NOT EXISTS origin_persona text,
    ADD COLUMN IF NOT EXISTS origin_visibility text,
    ADD COLUMN IF NOT EXISTS sources_beyond_origin boolean NOT NULL DEFAULT true;

-- The units already stored keep reading their sources (true is always right): filling their origin here rewrote
-- every unit under the ALTER's exclusive lock, ~100 s of blocked reads and writes per million units.

-- sql/007's audience trigger, which already joins a statement's new sources to their units, also marks a unit that
-- a source other than its origin row joined, in the same one statement (a second one cost the bulk fold 6% and
-- remember() more); a unit the fold has just made, its origin the source added, is not touched.
CREATE OR REPLACE FUNCTION memory_sources_audience() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_units u
    SET private_to = CASE WHEN u.private_to IS NULL OR a.shared THEN NULL
                          ELSE ARRAY(SELECT DISTINCT p FROM unnest(u.private_to || a.personas) AS p ORDER BY p) END,
        sources_beyond_origin = u.sources_beyond_origin OR a.other_than_one_row
                                OR a.inbox_id IS DISTINCT FROM u.origin_inbox_id
    FROM (SELECT unit_id, bool_or(visibility = 'project') AS shared,
                 coalesce(array_agg(persona) FILTER (WHERE visibility = 'private' AND persona IS NOT NULL), '{}')
                     AS personas,
                 min(inbox_id) AS inbox_id,  -- with the flag below: every source added is the one row
                 min(inbox_id) IS DISTINCT FROM max(inbox_id) OR count(inbox_id) < count(*)
                     AS other_than_one_row
          FROM added GROUP BY unit_id) AS a
    WHERE u.id = a.unit_id
      AND (u.private_to IS NOT NULL
           OR (NOT u.sources_beyond_origin
               AND (a.other_than_one_row OR a.inbox_id IS DISTINCT FROM u.origin_inbox_id)));
    RETURN NULL;
END $$;

-- A source changed (moved to another unit included) or deleted (forget, a merge's copies dropped): the units on
-- either side read their sources from then on.
CREATE OR REPLACE FUNCTION memory_sources_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        UPDATE memory_units u SET sources_beyond_origin = true
        WHERE u.id IN (SELECT unit_id FROM changed UNION SELECT unit_id FROM changed_to)
          AND NOT u.sources_beyond_origin;
    ELSE
        UPDATE memory_units u SET sources_beyond_origin = true
        WHERE u.id IN (SELECT unit_id FROM changed) AND NOT u.sources_beyond_origin;
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS memory_sources_deleted ON memory_sources;
CREATE TRIGGER memory_sources_deleted AFTER DELETE ON memory_sources REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION memory_sources_changed();
DROP TRIGGER IF EXISTS memory_sources_updated ON memory_sources;
CREATE TRIGGER memory_sources_updated AFTER UPDATE ON memory_sources
    REFERENCING OLD TABLE AS changed NEW TABLE AS changed_to
    FOR EACH STATEMENT EXECUTE FUNCTION memory_sources_changed();

-- The two folds of sql/018 and sql/019, unchanged but for a new unit's origin columns (tests/ledger/test_capture.py
-- still checks that they write a unit and a source alike).
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
                                  created_at, updated_by, updated_at, private_to,
                                  origin_session_id, origin_persona, origin_visibility, sources_beyond_origin)
        SELECT project, number, type, kind, title, body, paths, keywords, status, confidence,
               importance, fold_trust, content_hash, coalesce(valid_from, received_at), id,
               coalesce(persona, feed), received_at, coalesce(persona, feed), received_at,
               CASE WHEN visibility = 'private' THEN ARRAY[persona] END,
               session_id, persona, visibility, false
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
