-- Fragment: the units (alias o) a newcomer is compared with: older, of its project and kind, live, seen by every
-- reader (a merge never widens a private unit's audience), and not consolidated into it (a weekly summary is not a
-- duplicate of, nor in conflict with, the members it was built from). Both ways to the nearest one read these.
o.project = %(project)s::text AND o.kind = %(kind)s::text AND o.number < %(number)s::bigint
  AND o.status IN {live_statuses} AND o.private_to IS NULL
  AND o.consolidated_into IS DISTINCT FROM %(unit_id)s::uuid
