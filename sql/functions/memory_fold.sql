-- The set-based fold, which remember_many, `import`, the daily ledger fold and a replayed remember() run: the
-- inbox rows of the given keys become units, duplicates' sources, or are buried where their content was forgotten
-- (the rows of projects flagged as holding forgotten text: sql/042). Its current definition: sql/018, 024, 037,
-- 040, 047 and 050 hold its history, and each change of this file comes with a numbered migration saying why
-- (sql/042).
CREATE OR REPLACE FUNCTION memory_fold(fold_keys text[], fold_trust real, OUT projects_folded integer,
                                       OUT units_inserted bigint, OUT sources_linked bigint, OUT rows_buried bigint)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    fold_projects text[];
    guarded_projects text[];
    fold_rows bigint[];  -- the unfolded rows' ids, read once by their keys
    new_rows bigint[];  -- the rows that became units, and those units, in the same order
    new_units uuid[];
    rows_left bigint;  -- the rows no statement has folded yet
    linked_now bigint;
    violated text;  -- the constraint a unique violation names
    attempts integer := 0;
BEGIN
    -- Rows are read by their keys alone: "unfolded" is spelled coalesce(unit_id IS NULL, false) since sql/018, when
    -- the partial index of unfolded rows was on unit_id IS NULL and a plan that filtered the keys over it (a dead
    -- entry per past fold) slowed every remember() with the store's write history (16 ms at 30k units written); that
    -- index is on awaits_fold since sql/045, which no statement here filters by. Each row a statement below links
    -- stops awaiting its fold. The statements after this one read the rows by their ids (an integer compared, not a
    -- text through its collation).
    SELECT coalesce(array_agg(DISTINCT i.project ORDER BY i.project), '{}'), coalesce(array_agg(i.id), '{}')
    INTO fold_projects, fold_rows
    FROM memory_inbox i
    WHERE coalesce(i.unit_id IS NULL, false) AND i.idempotency_key = ANY (fold_keys);
    projects_folded := cardinality(fold_projects);
    IF projects_folded = 0 THEN
        units_inserted := 0; sources_linked := 0; rows_buried := 0;
        RETURN;
    END IF;
    -- every new project gets its counter row; then the counter rows are locked to commit, in name order so
    -- concurrent folds never deadlock: numbers stay gap-free, each after the project's highest (memory_last_number,
    -- read in the statement after the lock, so every unit committed before is seen; the rows are never updated by a
    -- fold: sql/047). Each statement below folds only rows of these projects: a row of another project captured
    -- meanwhile waits for its own fold.
    -- Under that lock, which a forget takes before it tombstones, the projects where some unit was ever forgotten:
    -- only their rows can hold forgotten content.
    INSERT INTO memory_projects (project) SELECT unnest(fold_projects) ON CONFLICT (project) DO NOTHING;
    SELECT coalesce(array_agg(locked.project) FILTER (WHERE locked.holds_forgotten), '{}') INTO guarded_projects
    FROM (SELECT p.project, p.holds_forgotten FROM memory_projects p WHERE p.project = ANY (fold_projects)
          ORDER BY p.project FOR UPDATE) AS locked;

    -- The two content probes (an OR of the statuses scanned the whole project) are subplans run per inbox row with
    -- the row's key as their index condition: OFFSET 0 keeps them from becoming anti-joins, which a plan made on
    -- small tables ran as one read of every live (and every forgotten) unit of the store per write.
    -- The live probe runs under the counter row's lock, which every write that inserts a unit takes, so the insert
    -- needs no ON CONFLICT (it probed the index once more per row and cost ~5 % of the fold: docs/scaling.md item
    -- 57). A unit made live by a write that takes no counter row (a weekly summary revived, an operator's UPDATE)
    -- and committed after this statement's snapshot fails the insert on memory_units_live_content: the insert is
    -- tried again, in a snapshot that sees that unit, and the row becomes its duplicate below; the numbers stay
    -- gap-free (ON CONFLICT had numbered the row it then skipped).
    LOOP
        BEGIN
            WITH cand AS (
                SELECT DISTINCT ON (i.project, i.kind, i.content_hash) i.*
                FROM memory_inbox i
                WHERE coalesce(i.unit_id IS NULL, false) AND i.id = ANY (fold_rows)
                  AND i.project = ANY (fold_projects)
                  AND NOT EXISTS (
                      SELECT 1 FROM memory_units u
                      WHERE u.project = i.project AND u.kind = i.kind AND u.content_hash = i.content_hash
                        AND u.status IN ('proposed', 'review', 'active', 'flagged', 'stale')
                      OFFSET 0)
                  AND NOT (i.project = ANY (guarded_projects) AND EXISTS (
                      SELECT 1 FROM memory_forgotten_contents f
                      WHERE f.project = i.project AND f.kind = i.kind AND f.content_hash = i.content_hash
                      OFFSET 0))
                  AND NOT EXISTS (
                      SELECT 1
                      FROM memory_held_by(i.project, i.kind, i.content_hash, i.received_at, i.visibility, i.persona)
                      OFFSET 0)
                ORDER BY i.project, i.kind, i.content_hash, i.id
            ), tops AS MATERIALIZED (
                SELECT f.project, coalesce(memory_last_number(f.project), 0) AS top
                FROM unnest(fold_projects) AS f(project)
            ), numbered AS (
                SELECT c.*, t.top + row_number() OVER (PARTITION BY c.project ORDER BY c.id) AS number
                FROM cand c JOIN tops t USING (project)
            ), inserted AS (
                INSERT INTO memory_units (project, number, type, kind, title, body, paths, keywords, status,
                                          confidence, importance, trust, content_hash, valid_from, origin_inbox_id,
                                          created_by, created_at, updated_by, updated_at, private_to,
                                          origin_session_id, origin_persona, origin_visibility,
                                          sources_beyond_origin)
                SELECT project, number, type, kind, title, body, paths, keywords, status, confidence,
                       importance, fold_trust, content_hash, coalesce(valid_from, received_at), id,
                       coalesce(persona, feed), received_at, coalesce(persona, feed), received_at,
                       CASE WHEN visibility = 'private' THEN ARRAY[persona] END,
                       session_id, persona, visibility, false
                FROM numbered
                RETURNING id, project, number, origin_inbox_id
            ), audited AS (
                INSERT INTO audit_log (actor, action, project, unit_id, reason, details)
                SELECT 'ledger', 'insert', project, id, NULL, jsonb_build_object('token', 'mem-' || number)
                FROM inserted
            )
            SELECT coalesce(array_agg(origin_inbox_id), '{}'), coalesce(array_agg(id), '{}')
            INTO new_rows, new_units
            FROM inserted;
            EXIT;
        EXCEPTION WHEN unique_violation THEN
            GET STACKED DIAGNOSTICS violated = CONSTRAINT_NAME;
            -- a snapshot older than this statement (a caller's REPEATABLE READ) never sees the unit or the number
            -- another transaction committed since, and more revivals than the fold has rows are no race: the
            -- caller's transaction is to be tried again, as ON CONFLICT had it say (the message names no content)
            IF violated IN ('memory_units_live_content', 'memory_units_project_number_key')
               AND (current_setting('transaction_isolation') NOT IN ('read committed', 'read uncommitted')
                    OR attempts >= cardinality(fold_rows)) THEN
                RAISE EXCEPTION 'memory_fold: units made live or numbered by another transaction as it inserted'
                    USING ERRCODE = 'serialization_failure';
            END IF;
            IF violated IS DISTINCT FROM 'memory_units_live_content' THEN
                RAISE;  -- a number taken under READ COMMITTED: the store is wrong, not the race
            END IF;
            attempts := attempts + 1;
        END;
    END LOOP;
    units_inserted := cardinality(new_rows);

    -- The rows left (a duplicate, forgotten or held content) are the only ones the statements below probe: each row
    -- that became a unit is that unit's origin, linked by the ids the insert returned.
    rows_left := cardinality(fold_rows) - units_inserted;
    fold_rows := CASE WHEN rows_left = 0 THEN '{}'
                      ELSE ARRAY(SELECT unnest(fold_rows) EXCEPT SELECT unnest(new_rows)) END;

    -- each row becomes the source of the live unit holding its content (one source per unit and task: a replayed
    -- task adds nothing); each row left is linked to that unit by the row's key, in subplans run per row (OFFSET 0,
    -- as the probes above): the statement joins no table the planner could read whole
    WITH linked_new AS (
        UPDATE memory_inbox i
        SET (unit_id, folded_at, outcome, awaits_fold) = (n.unit_id, now(), 'inserted', false)
        FROM unnest(new_rows, new_units) AS n(inbox_id, unit_id)
        WHERE i.id = n.inbox_id
        RETURNING i.*
    ), linked_left AS (
        UPDATE memory_inbox i
        SET (unit_id, folded_at, outcome) = (
                SELECT u.id, now(), CASE WHEN u.origin_inbox_id = i.id THEN 'inserted' ELSE 'duplicate' END
                FROM memory_units u
                WHERE u.project = i.project AND u.kind = i.kind AND u.content_hash = i.content_hash
                  AND u.status IN ('proposed', 'review', 'active', 'flagged', 'stale')),
            awaits_fold = false
        WHERE coalesce(i.unit_id IS NULL, false) AND i.id = ANY (fold_rows)
          AND i.project = ANY (fold_projects)
          AND EXISTS (
              SELECT 1 FROM memory_units u
              WHERE u.project = i.project AND u.kind = i.kind AND u.content_hash = i.content_hash
                AND u.status IN ('proposed', 'review', 'active', 'flagged', 'stale')
              OFFSET 0)
        RETURNING i.*
    ), linked AS (
        SELECT * FROM linked_new UNION ALL SELECT * FROM linked_left
    ), sourced AS (
        INSERT INTO memory_sources (unit_id, project, feed, task_id, session_id, persona, model, observed_sha,
                                    source_ref, visibility, inbox_id, created_at)
        SELECT unit_id, project, feed, task_id, session_id, persona, model, observed_sha, source_ref, visibility, id,
               received_at
        FROM linked
        ORDER BY id
        ON CONFLICT (unit_id, task_id) DO NOTHING
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM sourced), (SELECT count(*) FROM linked_left) INTO sources_linked, linked_now;
    rows_left := rows_left - linked_now;
    rows_buried := 0;

    IF rows_left > 0 AND cardinality(guarded_projects) > 0 THEN
        -- rows whose content was forgotten in their project (in any wording): linked to the tombstone, their text
        -- blanked at once; each row's tombstone looked up by the row's key, as above (the tombstone remember() takes:
        -- the lowest number)
        UPDATE memory_inbox i
        SET (unit_id, folded_at, outcome, title, body, paths, keywords) = (
                SELECT f.unit_id, now(), 'forgotten', '', '', '{}'::text[], '{}'::text[]
                FROM memory_forgotten_contents f
                WHERE f.project = i.project AND f.kind = i.kind AND f.content_hash = i.content_hash
                ORDER BY f.number
                LIMIT 1),
            awaits_fold = false
        WHERE coalesce(i.unit_id IS NULL, false) AND i.id = ANY (fold_rows)
          AND i.project = ANY (guarded_projects)
          AND EXISTS (
              SELECT 1 FROM memory_forgotten_contents f
              WHERE f.project = i.project AND f.kind = i.kind AND f.content_hash = i.content_hash
              OFFSET 0);
        GET DIAGNOSTICS rows_buried = ROW_COUNT;
        rows_left := rows_left - rows_buried;
    END IF;
    IF rows_left = 0 THEN
        RETURN;
    END IF;

    -- rows captured while a unit held their content, which a correction or a supersession replaced since
    -- (memory_held_by): each that unit's duplicate and source, as a fold at its capture would have made it; after the
    -- burial, so a forgotten content is never linked
    WITH linked AS (
        UPDATE memory_inbox i
        SET (unit_id, folded_at, outcome) = (
                SELECT h.unit_id, now(), 'duplicate'
                FROM memory_held_by(i.project, i.kind, i.content_hash, i.received_at, i.visibility, i.persona) h
                ORDER BY h.held_until DESC
                LIMIT 1),
            awaits_fold = false
        WHERE coalesce(i.unit_id IS NULL, false) AND i.id = ANY (fold_rows)
          AND i.project = ANY (fold_projects)
          AND EXISTS (
              SELECT 1 FROM memory_held_by(i.project, i.kind, i.content_hash, i.received_at, i.visibility, i.persona)
              OFFSET 0)
        RETURNING i.*
    ), sourced AS (
        INSERT INTO memory_sources (unit_id, project, feed, task_id, session_id, persona, model, observed_sha,
                                    source_ref, visibility, inbox_id, created_at)
        SELECT unit_id, project, feed, task_id, session_id, persona, model, observed_sha, source_ref, visibility, id,
               received_at
        FROM linked
        ORDER BY id
        ON CONFLICT (unit_id, task_id) DO NOTHING
        RETURNING 1
    )
    SELECT sources_linked + count(*) INTO sources_linked FROM sourced;
END $$;
