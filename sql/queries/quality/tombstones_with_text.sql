-- Forgotten units that still hold text in the ledger or in the inbox rows that captured them.
SELECT u.id::text
FROM memory_units u
WHERE u.status = {status_forgotten}
  AND (u.title <> '' OR u.body <> '' OR u.paths <> '{}' OR u.keywords <> '{}' OR u.tsv <> ''::tsvector
       OR EXISTS (SELECT 1 FROM memory_inbox i
                  WHERE i.unit_id = u.id AND (i.title <> '' OR i.body <> '' OR i.paths <> '{}' OR i.keywords <> '{}')));
