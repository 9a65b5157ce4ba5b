-- Fragment: whether a unit (alias u) is a weekly summary built from one of %(ids)s: written by the consolidation
-- feed, with a member link (a source of that feed whose task is the member's id) naming one of them.
(u.created_by = %(feed)s AND EXISTS (
    SELECT 1 FROM memory_sources s
    WHERE s.unit_id = u.id AND s.feed = %(feed)s AND s.task_id = ANY (%(ids)s::uuid[]::text[])))
