-- Forgotten units whose text, or text derived from it, is still held somewhere or could be stored again, one row
-- per (unit, place): the unit row; inbox rows that folded into it, or wait to fold with its content (in any wording
-- it held) since before the forget; a stored bundle revision; a vector; a weekly summary not forgotten (its member
-- links or a cluster name the unit); a member pointer to a summary not forgotten; a near-duplicate merged into it
-- that is not forgotten; and its project not flagged as holding forgotten text (sql/041 and sql/042: remember() and
-- the set-based fold would store the text again; a tombstone written while triggers were off, as a data-only restore
-- with --disable-triggers writes them, leaves it so).
WITH tombstones AS (
    SELECT u.id, u.project, u.kind, u.number, u.content_hash, u.consolidated_into,
           (u.title <> '' OR u.body <> '' OR u.paths <> '{}' OR u.keywords <> '{}' OR u.tsv <> ''::tsvector) AS texty,
           (SELECT max(a.at) FROM audit_log a WHERE a.unit_id = u.id AND a.action = %(forget)s) AS forgotten_at
    FROM memory_units u
    WHERE u.status = {status_forgotten}
)
SELECT t.id::text, 'unit' FROM tombstones t WHERE t.texty
UNION ALL
SELECT t.id::text, 'inbox' FROM tombstones t
WHERE EXISTS (SELECT 1 FROM memory_inbox i
              WHERE i.unit_id = t.id AND (i.title <> '' OR i.body <> '' OR i.paths <> '{}' OR i.keywords <> '{}'))
UNION ALL
SELECT t.id::text, 'unfolded inbox' FROM tombstones t
WHERE EXISTS (SELECT 1 FROM memory_inbox i
              WHERE i.unit_id IS NULL AND i.project = t.project AND i.kind = t.kind
                AND i.content_hash IN (SELECT f.content_hash FROM memory_forgotten_contents f WHERE f.unit_id = t.id)
                AND i.received_at < t.forgotten_at)
UNION ALL
SELECT t.id::text, 'bundle' FROM tombstones t
WHERE EXISTS (SELECT 1 FROM memory_bundles b
              WHERE b.project = t.project
                AND b.bundle->'units' @> jsonb_build_array(jsonb_build_object('id', {token_prefix} || t.number)))
UNION ALL
SELECT t.id::text, 'vector' FROM tombstones t
WHERE EXISTS (SELECT 1 FROM memory_embeddings e WHERE e.unit_id = t.id)
UNION ALL
SELECT t.id::text, 'summary' FROM tombstones t
WHERE EXISTS (SELECT 1 FROM consolidation_clusters c WHERE t.id = ANY (c.members) OR c.consolidated_unit = t.id)
   OR EXISTS (SELECT 1 FROM memory_sources s JOIN memory_units d ON d.id = s.unit_id
              WHERE s.feed = %(feed)s AND s.task_id = t.id::text AND d.created_by = %(feed)s
                AND d.status <> {status_forgotten})
UNION ALL
SELECT t.id::text, 'member pointer' FROM tombstones t
WHERE EXISTS (SELECT 1 FROM memory_units d WHERE d.id = t.consolidated_into AND d.status <> {status_forgotten})
UNION ALL
SELECT t.id::text, 'merged duplicate' FROM tombstones t
WHERE EXISTS (SELECT 1 FROM memory_units d WHERE d.duplicate_of = t.id AND d.status <> {status_forgotten})
UNION ALL
SELECT t.id::text, 'unguarded project' FROM tombstones t
WHERE NOT EXISTS (SELECT 1 FROM memory_projects p WHERE p.project = t.project AND p.holds_forgotten)
ORDER BY 1, 2;
