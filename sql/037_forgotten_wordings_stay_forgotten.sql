-- A forgotten unit's text is never stored again, but a correction replaced a unit's content hash in place: a unit
-- corrected and then forgotten kept only its last wording's hash, so its earlier wordings (the one agents first
-- wrote included) folded as new live units. Every wording a correction replaces is kept here, as a hash (never the
-- text), and every write's forgotten-content probe reads the forgotten units' earlier wordings beside their last.
CREATE TABLE IF NOT EXISTS memory_former_wordings (
    project      text NOT NULL,
    kind         text NOT NULL,
    content_hash text NOT NULL,
    unit_id      uuid NOT NULL REFERENCES memory_units (id),
    replaced_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, kind, content_hash, unit_id)
);
-- A tombstone's former wordings by its id: a forget blanks the rows waiting to fold in any of them, and the
-- tombstone check reads them per tombstone (without it each read scanned the whole table: a forget with 20,000 rows
-- waiting and as many former wordings took 12.9 s, holding the project's counter row).
CREATE INDEX IF NOT EXISTS memory_former_wordings_unit ON memory_former_wordings (unit_id, content_hash);
-- Like every memory table (sql/009): row-level security forced, the owner through its own policy, the analysts
-- reading every row (hashes only, as they read the units' content_hash).
GRANT SELECT ON memory_former_wordings TO memory_reader;
ALTER TABLE memory_former_wordings ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_former_wordings FORCE ROW LEVEL SECURITY;
DO $$
BEGIN
    EXECUTE 'DROP POLICY IF EXISTS owner_maintenance ON memory_former_wordings';
    EXECUTE format('CREATE POLICY owner_maintenance ON memory_former_wordings TO %I USING (true) WITH CHECK (true)',
                   (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'memory_former_wordings'::regclass));
END $$;
DROP POLICY IF EXISTS analyst_read ON memory_former_wordings;
CREATE POLICY analyst_read ON memory_former_wordings FOR SELECT TO memory_reader USING (true);

-- The wordings corrected away before this migration that the inbox still knows: a row folded into a unit whose
-- content has changed since (the intermediate wordings of several corrections were never captured, so are lost).
INSERT INTO memory_former_wordings (project, kind, content_hash, unit_id)
SELECT DISTINCT i.project, i.kind, i.content_hash, i.unit_id
FROM memory_inbox i
JOIN memory_units u ON u.id = i.unit_id
WHERE i.content_hash <> u.content_hash AND i.kind = u.kind
ON CONFLICT DO NOTHING;

-- The forgotten-content probes by their whole key on an index of the tombstones alone, as the live ones have theirs
-- (memory_units_live_content). Through sql/017's (project, status, kind, content_hash) a generic plan could take
-- (project, number) instead, both costed alike where the statistics say each project has one unit (a store analysed
-- young, the tests' own after another test's few units): every new unit's write then read every unit of its project.
CREATE INDEX IF NOT EXISTS memory_units_forgotten_content ON memory_units (project, kind, content_hash)
    WHERE status = 'forgotten';

-- Every content forgotten in a project, whichever wording it was: each tombstone's last wording and the ones it held
-- before a correction, with the tombstone. What a write, a capture, a correction and a forget probe, by the whole
-- key or by the tombstone (each branch by its own index: the planner pushes the conditions into both).
CREATE OR REPLACE VIEW memory_forgotten_contents AS
SELECT u.project, u.kind, u.content_hash, u.id AS unit_id, u.number
FROM memory_units u
WHERE u.status = 'forgotten'
UNION ALL
SELECT w.project, w.kind, w.content_hash, u.id, u.number
FROM memory_former_wordings w
JOIN memory_units u ON u.id = w.unit_id
WHERE u.status = 'forgotten';

-- sql/024's two folds, unchanged but for their forgotten-content probes, which now read the forgotten units'
-- earlier wordings too, and their other probes, which read the key of the row just captured from variables instead
-- of joining that row back (tests/ledger/test_capture.py still checks that they write a unit and a source alike).
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
    row_kind text;
    row_hash text;
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
    RETURNING id, project, kind, content_hash INTO row_id, row_project, row_kind, row_hash;
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
    FROM memory_units u
    WHERE u.project = row_project AND u.kind = row_kind AND u.content_hash = row_hash
      AND u.status IN ('proposed', 'review', 'active', 'flagged', 'stale');
    became := 'duplicate';
    IF NOT FOUND THEN
        SELECT f.unit_id, f.number, 'forgotten' INTO found_id, found_number, found_status
        FROM memory_forgotten_contents f
        WHERE f.project = row_project AND f.kind = row_kind AND f.content_hash = row_hash
        ORDER BY f.number
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
        ELSE  -- a write that holds no counter row made the content live meanwhile (none does now): link to it
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
    RETURN QUERY SELECT became, found_id, found_number, found_status, false;
END $$;

-- A forget now also takes every unit of its project holding the forgotten text, in its last wording or an earlier
-- one (lifecycle/derived_units): a superseded or retired unit of the same words, and a unit written in the earlier
-- words after a correction. This repairs what forgets before it left behind, as sql/010 did for derived text, with
-- its steps: those units are tombstoned (audited as derived), with whatever derives from them in turn, and their
-- inbox rows, clusters, member pointers, merged-in sources and bundle entries are cleared. Every read goes by a key
-- (sql/010's form, which tests every unit against an array of every tombstone, would take hours on a large ledger),
-- and a ledger with nothing to repair stops after the first read.
DO $$
DECLARE
    frontier uuid[];
    found uuid[];
    forgotten uuid[] := '{}';  -- the units this repair tombstones
BEGIN
    SELECT coalesce(array_agg(DISTINCT u.id), '{}') INTO found
    FROM (SELECT DISTINCT f.project, f.kind, f.content_hash FROM memory_forgotten_contents f) AS t
    JOIN memory_units u ON u.project = t.project AND u.kind = t.kind AND u.content_hash = t.content_hash
    WHERE u.status IN ('proposed', 'review', 'active', 'flagged', 'stale', 'superseded', 'retired');
    WHILE cardinality(found) > 0 LOOP
        UPDATE memory_units
        SET status = 'forgotten', title = '', body = '', paths = '{}', keywords = '{}', personas = '{}',
            valid_until = coalesce(valid_until, greatest(valid_from, now())), updated_by = 'migration'
        WHERE id = ANY (found);
        INSERT INTO audit_log (actor, action, project, unit_id, reason, details)
        SELECT 'migration', 'forget', project, id, 'holds the text of a forgotten unit', '{"migration": 37}'
        FROM memory_units WHERE id = ANY (found);
        forgotten := forgotten || found;
        frontier := found;
        -- what derives from them in turn: the weekly summaries built from them, the near-duplicates merged into them
        SELECT coalesce(array_agg(DISTINCT u.id), '{}') INTO found
        FROM (SELECT s.unit_id AS id
              FROM memory_sources s
              JOIN unnest(frontier) AS t(id) ON s.task_id = t.id::text
              JOIN memory_units d ON d.id = s.unit_id AND d.created_by = 'consolidation'
              WHERE s.feed = 'consolidation'
              UNION
              SELECT c.consolidated_unit FROM consolidation_clusters c WHERE c.members && frontier
              UNION
              SELECT d.id FROM memory_units d JOIN unnest(frontier) AS t(id) ON d.duplicate_of = t.id) AS derived
        JOIN memory_units u ON u.id = derived.id
        WHERE u.status <> 'forgotten';
    END LOOP;
    IF cardinality(forgotten) = 0 THEN
        RETURN;
    END IF;

    -- sources a merge copied from a tombstone onto the unit it was merged into (along the duplicate_of chain)
    WITH RECURSIVE canon(unit_id, source_unit) AS (
        SELECT duplicate_of, id FROM memory_units WHERE id = ANY (forgotten) AND duplicate_of IS NOT NULL
        UNION
        SELECT u.duplicate_of, c.source_unit
        FROM canon c JOIN memory_units u ON u.id = c.unit_id
        WHERE u.duplicate_of IS NOT NULL
    )
    DELETE FROM memory_sources copy
    USING canon k, memory_sources s
    WHERE copy.unit_id = k.unit_id AND NOT k.unit_id = ANY (forgotten)
      AND s.unit_id = k.source_unit
      AND copy.task_id IS NOT DISTINCT FROM s.task_id AND copy.inbox_id IS NOT DISTINCT FROM s.inbox_id
      AND copy.created_at = s.created_at;

    -- clusters that list a tombstone or name one as their summary; pointers at tombstoned summaries
    DELETE FROM consolidation_clusters WHERE consolidated_unit = ANY (forgotten) OR members && forgotten;
    UPDATE memory_units SET consolidated_into = NULL WHERE consolidated_into = ANY (forgotten);
    UPDATE memory_units u SET consolidated_into = NULL
    WHERE u.id = ANY (forgotten) AND u.consolidated_into IS NOT NULL;

    -- inbox rows that folded into one of them, then those that wait to fold with its content in any of its
    -- wordings (two statements: as one, an OR of the two made the join a nested loop over the inbox per unit)
    UPDATE memory_inbox i
    SET title = '', body = '', paths = '{}', keywords = '{}'
    WHERE i.unit_id = ANY (forgotten) AND (i.title <> '' OR i.body <> '' OR i.paths <> '{}' OR i.keywords <> '{}');
    UPDATE memory_inbox i
    SET title = '', body = '', paths = '{}', keywords = '{}', unit_id = f.unit_id, outcome = 'forgotten',
        folded_at = now()
    FROM memory_forgotten_contents f
    WHERE f.unit_id = ANY (forgotten)
      AND i.unit_id IS NULL AND i.project = f.project AND i.kind = f.kind AND i.content_hash = f.content_hash;

    -- stored bundle revisions of their projects that list one of them
    UPDATE memory_bundles b
    SET units = jsonb_array_length(kept.units), bundle = jsonb_set(b.bundle, ARRAY['units'], kept.units)
    FROM (SELECT k.project, k.revision,
                 (SELECT coalesce(jsonb_agg(e.u ORDER BY e.n), '[]')
                  FROM jsonb_array_elements(k.bundle->'units') WITH ORDINALITY AS e(u, n)
                  WHERE NOT EXISTS (SELECT 1 FROM memory_units f
                                    WHERE f.id = ANY (forgotten) AND f.project = k.project
                                      AND 'mem-' || f.number = e.u->>'id')) AS units
          FROM memory_bundles k
          WHERE k.project IN (SELECT f.project FROM memory_units f WHERE f.id = ANY (forgotten))) AS kept
    WHERE b.project = kept.project AND b.revision = kept.revision
      AND jsonb_array_length(kept.units) <> jsonb_array_length(b.bundle->'units');
END $$;
