-- Projects with unfolded inbox rows selected by %(day)s or %(ids)s.
SELECT DISTINCT project FROM memory_inbox i
WHERE {ledger/_unfolded_inbox}
ORDER BY project;
