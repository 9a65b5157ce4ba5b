-- Point each unfolded inbox row at the live unit holding its content and record it as that unit's source
-- (one source per unit and task: a replayed task adds nothing).
WITH linked AS (
    UPDATE memory_inbox i
    SET unit_id = u.id,
        folded_at = now(),
        outcome = CASE WHEN u.origin_inbox_id = i.id THEN {inbox_inserted} ELSE {inbox_duplicate} END
    FROM memory_units u
    WHERE {ledger/_unfolded_inbox}
      AND i.project = ANY (%(projects)s::text[])
      AND u.project = i.project AND u.kind = i.kind AND u.content_hash = i.content_hash
      AND u.status IN {live_statuses}
    RETURNING i.*
)
INSERT INTO memory_sources (unit_id, project, {provenance_columns}, inbox_id, created_at)
SELECT unit_id, project, {provenance_columns}, id, received_at
FROM linked
ORDER BY id
ON CONFLICT (unit_id, task_id) DO NOTHING;
