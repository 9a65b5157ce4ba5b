-- Lock a merge's newcomer and canonical unit while both are live and still hold the text curation judged (the
-- revisions it read: a correction since may have made them different facts), the caller holding the derivation
-- lock and the counter row (curation.hold_project), so a forget has committed or waits: fewer than two rows means
-- one changed and nothing is merged. FOR NO KEY UPDATE, as an update of theirs would lock them: no key changes, and
-- FOR UPDATE also held off every foreign key's check of them (decay's scores of the day checked them in an order of
-- their own, and deadlocked with it).
SELECT id
FROM memory_units
WHERE ((id = %(newcomer)s::uuid AND revision = %(newcomer_revision)s)
       OR (id = %(canonical)s::uuid AND revision = %(canonical_revision)s))
  AND status IN {live_statuses}
ORDER BY id
FOR NO KEY UPDATE;
