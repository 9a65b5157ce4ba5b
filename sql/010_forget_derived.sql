-- Forget reaches derived text (issue #13). A forget now takes along, in its own transaction, the weekly summaries
-- built from the forgotten unit and the near-duplicates a merge retired into it (memory_assets/lifecycle.py). This
-- repairs what forgets before that left behind, so no_text_in_tombstones holds on an upgraded ledger: the same
-- derived units are tombstoned (audited as derived), and every tombstone's inbox rows, clusters, member pointers,
-- merged-in sources and bundle entries are cleared. Idempotent: on a clean ledger nothing matches.
DO $$
DECLARE
    frontier uuid[];
    found uuid[];
    forgotten uuid[];
BEGIN
    SELECT coalesce(array_agg(id), '{}') INTO frontier FROM memory_units WHERE status = 'forgotten';
    LOOP
        SELECT coalesce(array_agg(u.id), '{}') INTO found
        FROM memory_units u
        WHERE u.status <> 'forgotten'
          AND ((u.created_by = 'consolidation' AND EXISTS (
                    SELECT 1 FROM memory_sources s JOIN memory_units f ON f.id::text = s.task_id
                    WHERE s.unit_id = u.id AND s.feed = 'consolidation' AND f.id = ANY (frontier)
                      AND f.project = u.project))
               OR EXISTS (SELECT 1 FROM consolidation_clusters c
                          WHERE c.consolidated_unit = u.id AND c.members && frontier)
               OR u.duplicate_of = ANY (frontier));
        EXIT WHEN cardinality(found) = 0;
        UPDATE memory_units
        SET status = 'forgotten', title = '', body = '', paths = '{}', keywords = '{}', personas = '{}',
            valid_until = coalesce(valid_until, greatest(valid_from, now())), updated_by = 'migration'
        WHERE id = ANY (found);
        INSERT INTO audit_log (actor, action, project, unit_id, reason, details)
        SELECT 'migration', 'forget', project, id, 'derived from a forgotten unit', '{"migration": 10}'
        FROM memory_units WHERE id = ANY (found);
        frontier := found;
    END LOOP;

    SELECT coalesce(array_agg(id), '{}') INTO forgotten FROM memory_units WHERE status = 'forgotten';

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

    -- inbox rows that folded into a tombstone, or wait to fold with its content
    UPDATE memory_inbox i
    SET title = '', body = '', paths = '{}', keywords = '{}', unit_id = u.id,
        outcome = coalesce(i.outcome, 'forgotten'), folded_at = coalesce(i.folded_at, now())
    FROM memory_units u
    WHERE u.id = ANY (forgotten)
      AND ((i.unit_id = u.id AND (i.title <> '' OR i.body <> '' OR i.paths <> '{}' OR i.keywords <> '{}'))
           OR (i.unit_id IS NULL AND i.project = u.project AND i.kind = u.kind AND i.content_hash = u.content_hash));

    -- stored bundle revisions that still list a tombstone
    UPDATE memory_bundles b
    SET units = jsonb_array_length(kept.units), bundle = jsonb_set(b.bundle, ARRAY['units'], kept.units)
    FROM (SELECT k.project, k.revision,
                 (SELECT coalesce(jsonb_agg(e.u ORDER BY e.n), '[]')
                  FROM jsonb_array_elements(k.bundle->'units') WITH ORDINALITY AS e(u, n)
                  WHERE NOT EXISTS (SELECT 1 FROM memory_units f
                                    WHERE f.project = k.project AND f.status = 'forgotten'
                                      AND 'mem-' || f.number = e.u->>'id')) AS units
          FROM memory_bundles k) AS kept
    WHERE b.project = kept.project AND b.revision = kept.revision
      AND jsonb_array_length(kept.units) <> jsonb_array_length(b.bundle->'units');
END $$;
