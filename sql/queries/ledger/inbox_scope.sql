-- Projects with unfolded inbox rows selected by %(keys)s.
SELECT DISTINCT project FROM memory_inbox i
WHERE {ledger/_unfolded_inbox}
ORDER BY project;
