-- Two changes to the set-based fold (sql/037's memory_fold, which remember_many, `import`, the daily ledger fold and
-- a replayed remember() run).
--
-- Each row's unit looked up by the row's key. The fold linked each captured row to the unit holding its content, and
-- buried the rows whose content was forgotten, by joining the batch's rows to the units. Where the statistics said
-- no unit was live (a store analysed young, or when its units were superseded), the generic plan read every live
-- unit of the store and searched the batch's keys for each: 2,000 rows took 8.8 s beside 3,000 live units the
-- statistics had not seen. Both statements now look each row's unit up in subplans run per row, as the fold's
-- content probes do, whatever the statistics say (0.17 s; docs/scaling.md item 45 has the costs).
--
-- A row judged by what the ledger held when it was captured. A row captured to fold later (remember_many(fold_now=
-- False), `import --no-fold`) in words a unit held then, which a correction or a supersession replaced before the
-- fold, became a new live unit in the replaced words: the correction undone, or two live units contradicting each
-- other. It is now that unit's duplicate and source, as a fold at its capture would have made it, where linking it
-- widens the unit's audience to no one: a private unit takes no row of another persona (its corrected words, or
-- its successor's, would reach a reader who never wrote them), and such a row becomes a unit of its own, as before.
-- A row captured after the replacement, or before the unit held the words, is a unit of its own too.

-- The superseded units by their content, probed per row as the live and forgotten ones are.
CREATE INDEX IF NOT EXISTS memory_units_superseded_content ON memory_units (project, kind, content_hash)
    WHERE status = 'superseded';

-- When a correction's unit began to hold the wording it replaced (its previous correction, or its creation), kept
-- from now on beside the time it was replaced (sql/queries/ledger/correct_unit.sql): a wording replaced before this
-- migration has none, and is not searched below (sql/037 dated the ones it took from the inbox by its own run).
ALTER TABLE memory_former_wordings ADD COLUMN IF NOT EXISTS held_from timestamptz;

-- The unit that held a content when a row was captured, and holds it no more, that a row of that visibility and
-- persona may join without widening its audience; with the time it stopped holding it. A live or superseded unit
-- held a wording a correction replaced from held_from until its replacement, or its supersession if that came first
-- (a superseded unit corrected later held nothing after it); a superseded unit held its words from its last
-- correction (or its creation, or its valid_from if later) until its supersession. A unit whose supersession left
-- it no validity (its valid_from was later) held nothing. One interval a wording and unit: a wording held twice
-- counts from its later tenure, and a row of the earlier one becomes a unit of its own, as before. Inlined where it
-- is called (one SELECT, SQL, STABLE), so each branch reads by its own index.
CREATE OR REPLACE FUNCTION memory_held_by(held_project text, held_kind text, held_hash text, captured_at timestamptz,
                                          row_visibility text, row_persona text)
RETURNS TABLE (unit_id uuid, held_until timestamptz)
LANGUAGE sql STABLE
AS $$
    SELECT h.unit_id, h.held_until
    FROM (
        SELECT w.unit_id, u.private_to, least(w.replaced_at, u.valid_until) AS held_until, w.held_from
        FROM memory_former_wordings w
        JOIN memory_units u ON u.id = w.unit_id
        WHERE w.project = held_project AND w.kind = held_kind AND w.content_hash = held_hash
          AND w.held_from IS NOT NULL
          AND u.status IN ('proposed', 'review', 'active', 'flagged', 'stale', 'superseded')
          AND (u.valid_until IS NULL OR u.valid_from < u.valid_until)
        UNION ALL
        SELECT u.id, u.private_to, u.valid_until,
               greatest(u.valid_from, coalesce((SELECT max(e.replaced_at) FROM memory_former_wordings e
                                                WHERE e.unit_id = u.id), u.created_at))
        FROM memory_units u
        WHERE u.project = held_project AND u.kind = held_kind AND u.content_hash = held_hash
          AND u.status = 'superseded'
    ) AS h
    WHERE h.held_from <= captured_at AND captured_at < h.held_until
      AND (h.private_to IS NULL OR (row_visibility = 'private' AND row_persona = ANY (h.private_to)))
$$;

-- sql/037's set-based fold with those two changes.
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
              SELECT 1 FROM memory_forgotten_contents f
              WHERE f.project = i.project AND f.kind = i.kind AND f.content_hash = i.content_hash
              OFFSET 0)
          AND NOT EXISTS (
              SELECT 1 FROM memory_held_by(i.project, i.kind, i.content_hash, i.received_at, i.visibility, i.persona)
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
    -- per unit and task: a replayed task adds nothing); each row's unit is looked up by the row's key, in subplans
    -- run per row (OFFSET 0, as the probes above): the statement joins no table the planner could read whole
    WITH linked AS (
        UPDATE memory_inbox i
        SET (unit_id, folded_at, outcome) = (
                SELECT u.id, now(), CASE WHEN u.origin_inbox_id = i.id THEN 'inserted' ELSE 'duplicate' END
                FROM memory_units u
                WHERE u.project = i.project AND u.kind = i.kind AND u.content_hash = i.content_hash
                  AND u.status IN ('proposed', 'review', 'active', 'flagged', 'stale'))
        WHERE coalesce(i.unit_id IS NULL, false) AND i.idempotency_key = ANY (fold_keys)
          AND i.project = ANY (fold_projects)
          AND EXISTS (
              SELECT 1 FROM memory_units u
              WHERE u.project = i.project AND u.kind = i.kind AND u.content_hash = i.content_hash
                AND u.status IN ('proposed', 'review', 'active', 'flagged', 'stale')
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
    SELECT count(*) INTO sources_linked FROM sourced;

    -- rows whose content was forgotten in their project (in any wording): linked to the tombstone, their text
    -- blanked at once; each row's tombstone looked up by the row's key, as above (the tombstone remember() takes:
    -- the lowest number)
    UPDATE memory_inbox i
    SET (unit_id, folded_at, outcome, title, body, paths, keywords) = (
            SELECT f.unit_id, now(), 'forgotten', '', '', '{}'::text[], '{}'::text[]
            FROM memory_forgotten_contents f
            WHERE f.project = i.project AND f.kind = i.kind AND f.content_hash = i.content_hash
            ORDER BY f.number
            LIMIT 1)
    WHERE coalesce(i.unit_id IS NULL, false) AND i.idempotency_key = ANY (fold_keys)
      AND i.project = ANY (fold_projects)
      AND EXISTS (
          SELECT 1 FROM memory_forgotten_contents f
          WHERE f.project = i.project AND f.kind = i.kind AND f.content_hash = i.content_hash
          OFFSET 0);
    GET DIAGNOSTICS rows_buried = ROW_COUNT;

    -- rows captured while a unit held their content, which a correction or a supersession replaced since
    -- (memory_held_by): each that unit's duplicate and source, as a fold at its capture would have made it; after the
    -- burial, so a forgotten content is never linked
    WITH linked AS (
        UPDATE memory_inbox i
        SET (unit_id, folded_at, outcome) = (
                SELECT h.unit_id, now(), 'duplicate'
                FROM memory_held_by(i.project, i.kind, i.content_hash, i.received_at, i.visibility, i.persona) h
                ORDER BY h.held_until DESC
                LIMIT 1)
        WHERE coalesce(i.unit_id IS NULL, false) AND i.idempotency_key = ANY (fold_keys)
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
