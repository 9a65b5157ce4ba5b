-- Fragment: the units (alias o) a newcomer is compared with: older, of its project and kind, live, and seen by every
-- reader (a merge never widens a private unit's audience). Both ways to the nearest one read exactly these.
o.project = %(project)s::text AND o.kind = %(kind)s::text AND o.number < %(number)s::bigint
  AND o.status IN {live_statuses} AND o.private_to IS NULL
