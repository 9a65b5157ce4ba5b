-- A fold judges a captured row by what the ledger held when the row was captured. A row captured to fold later
-- (remember_many(fold_now=False), `import --no-fold`: the daily fold takes it) whose content a live unit held then,
-- and which a correction or a supersession replaced before the fold, became a new live unit in the replaced words:
-- the correction undone, or two live units contradicting each other. It now becomes that unit's duplicate and source.
-- A row captured after the correction or supersession is a new assertion and becomes a new unit, as remember() does.

-- The superseded units by their content, probed by the fold per row as the live and forgotten ones are.
CREATE INDEX IF NOT EXISTS memory_units_superseded_content ON memory_units (project, kind, content_hash)
    WHERE status = 'superseded';

-- Every content a unit not forgotten held until a time, and holds no more: the wordings a correction replaced, and
-- a superseded unit's words (until it was closed). What the fold probes, by the whole key (each branch by its own
-- index: the planner pushes the conditions into both).
CREATE OR REPLACE VIEW memory_held_contents AS
SELECT w.project, w.kind, w.content_hash, w.unit_id, w.replaced_at AS held_until
FROM memory_former_wordings w
JOIN memory_units u ON u.id = w.unit_id
WHERE u.status <> 'forgotten'
UNION ALL
SELECT u.project, u.kind, u.content_hash, u.id, u.valid_until
FROM memory_units u
WHERE u.status = 'superseded';

-- sql/037's set-based fold, unchanged but for the probe of held contents before inserting and the link of the rows
-- that match one (after the forgotten rows are buried, so a forgotten content is never linked as held).
CREATE OR REPLACE FUNCTION memory_fold(fold_keys text[], fold_trust real, OUT projects_folded integer,
                                       OUT units_inserted bigint, OUT sources_linked bigint, OUT rows_buried bigint)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
    fold_projects text[];
    held_linked bigint;
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
              SELECT 1 FROM memory_held_contents h
              WHERE h.project = i.project AND h.kind = i.kind AND h.content_hash = i.content_hash
                AND h.held_until > i.received_at
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

    -- rows whose content was forgotten in their project (in any wording): linked to the tombstone, their text
    -- blanked at once
    UPDATE memory_inbox i
    SET unit_id = f.unit_id, folded_at = now(), outcome = 'forgotten', title = '', body = '', paths = '{}',
        keywords = '{}'
    FROM memory_forgotten_contents f
    WHERE coalesce(i.unit_id IS NULL, false) AND i.idempotency_key = ANY (fold_keys)
      AND i.project = ANY (fold_projects)
      AND f.project = i.project AND f.kind = i.kind AND f.content_hash = i.content_hash;
    GET DIAGNOSTICS rows_buried = ROW_COUNT;

    -- rows captured while a unit held their content, which a correction or a supersession replaced before this
    -- fold: each the duplicate and a source of that unit, as a fold at its capture would have made it, never a new
    -- live unit in the replaced words
    WITH held AS (
        SELECT DISTINCT ON (i.id) i.id, h.unit_id
        FROM memory_inbox i
        JOIN memory_held_contents h ON h.project = i.project AND h.kind = i.kind AND h.content_hash = i.content_hash
                                   AND h.held_until > i.received_at
        WHERE coalesce(i.unit_id IS NULL, false) AND i.idempotency_key = ANY (fold_keys)
          AND i.project = ANY (fold_projects)
        ORDER BY i.id, h.held_until DESC
    ), linked AS (
        UPDATE memory_inbox i
        SET unit_id = held.unit_id, folded_at = now(), outcome = 'duplicate'
        FROM held
        WHERE i.id = held.id
        RETURNING i.*
    )
    INSERT INTO memory_sources (unit_id, project, feed, task_id, session_id, persona, model, observed_sha, source_ref,
                                visibility, inbox_id, created_at)
    SELECT unit_id, project, feed, task_id, session_id, persona, model, observed_sha, source_ref, visibility, id,
           received_at
    FROM linked
    ORDER BY id
    ON CONFLICT (unit_id, task_id) DO NOTHING;
    GET DIAGNOSTICS held_linked = ROW_COUNT;
    sources_linked := sources_linked + held_linked;
END $$;
