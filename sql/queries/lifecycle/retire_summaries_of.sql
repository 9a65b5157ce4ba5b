-- The live weekly summaries built from a unit whose words a correction just replaced retire, so no summary serves
-- the words the correction replaced (re-materialising the week's consolidation rebuilds them from the members'
-- words as they are); their ids, whose clusters the caller drops.
UPDATE memory_units u
SET status = {status_retired}, updated_by = %(actor)s
WHERE u.project = %(project)s AND u.status IN {live_statuses} AND {lifecycle/_summary_of}
RETURNING u.id;
