-- Fold unfolded inbox rows (selected by %(keys)s) into the ledger: new content becomes units
-- numbered after the project's counter, every row becomes a source of the live unit with its content. Content
-- that was forgotten is never inserted again (bury_inbox.sql links it to the tombstone).
-- The caller holds the counter rows of %(projects)s locked (ledger.capture.fold) for the transaction.
WITH cand AS (
    SELECT DISTINCT ON (i.project, i.kind, i.content_hash) i.*
    FROM memory_inbox i
    WHERE {ledger/_unfolded_inbox}
      AND i.project = ANY (%(projects)s::text[])
      -- Two probes, each on its own index (an OR of the statuses scanned the whole project), each a subplan run
      -- per inbox row with the row's key as its index condition: OFFSET 0 keeps them from becoming anti-joins,
      -- which a generic plan made on small tables ran as one read of every live (and every forgotten) unit of
      -- the store per write, kept by the connection as the store grew (remember() 1.7 to 4.1 ms a call over
      -- 5,000 writes, ~4,900 units read each).
      AND NOT EXISTS (
          SELECT 1 FROM memory_units u
          WHERE u.project = i.project AND u.kind = i.kind AND u.content_hash = i.content_hash
            AND u.status IN {live_statuses}
          OFFSET 0)
      AND NOT EXISTS (
          SELECT 1 FROM memory_units u
          WHERE u.project = i.project AND u.kind = i.kind AND u.content_hash = i.content_hash
            AND u.status = {status_forgotten}
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
           importance, %(trust)s, content_hash, coalesce(valid_from, received_at), id,
           coalesce(persona, feed), received_at, coalesce(persona, feed), received_at,
           CASE WHEN visibility = {visibility_private} THEN ARRAY[persona] END
    FROM numbered
    ON CONFLICT (project, kind, content_hash) WHERE status IN {live_statuses}
    DO NOTHING
    RETURNING id, project, number
), counters AS (
    UPDATE memory_projects p SET last_number = m.top
    FROM (SELECT project, max(number) AS top FROM inserted GROUP BY project) m
    WHERE p.project = m.project
    RETURNING p.project
)
INSERT INTO audit_log (actor, action, project, unit_id, reason, details)
SELECT 'ledger', 'insert', project, id, NULL, jsonb_build_object('token', {token_prefix} || number)
FROM inserted;
