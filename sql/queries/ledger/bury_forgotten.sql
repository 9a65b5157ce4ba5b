-- Rows just captured, to fold later, whose content is forgotten in their project (in any wording): linked to the
-- tombstone and blanked at once, as the fold would bury them, so no forgotten text waits in the inbox for a fold.
-- Each row's tombstone is looked up by the row's key, as the fold does (sql/040): no join the planner could drive
-- from every tombstone of the store.
UPDATE memory_inbox i
SET (unit_id, folded_at, outcome, title, body, paths, keywords) = (
        SELECT f.unit_id, now(), {inbox_forgotten}, '', '', '{}'::text[], '{}'::text[]
        FROM memory_forgotten_contents f
        WHERE f.project = i.project AND f.kind = i.kind AND f.content_hash = i.content_hash
        ORDER BY f.number
        LIMIT 1),
    awaits_fold = false
WHERE i.idempotency_key = ANY (%(keys)s::text[]) AND coalesce(i.unit_id IS NULL, false)
  AND EXISTS (
      SELECT 1 FROM memory_forgotten_contents f
      WHERE f.project = i.project AND f.kind = i.kind AND f.content_hash = i.content_hash
      OFFSET 0);
