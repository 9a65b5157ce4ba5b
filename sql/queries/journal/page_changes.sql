-- The next changes after a consumer's cursor (%(xid)s, %(seq)s), oldest first, only from transactions below the
-- snapshot's xmin: those can no longer add rows, so a page never skips a change committed later.
SELECT seq, xid::text::bigint, unit_id::text, project, revision, status, change
FROM memory_changes
WHERE (xid, seq) > (%(xid)s::text::xid8, %(seq)s::bigint) AND xid < pg_snapshot_xmin(pg_current_snapshot())
ORDER BY xid, seq
LIMIT %(limit)s::bigint;
