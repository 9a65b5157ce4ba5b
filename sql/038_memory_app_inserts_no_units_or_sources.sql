-- memory_app (an agent's scoped transaction) may insert units and sources by sql/003's grants, checked by project
-- alone, though no request path inserts either as that role: folds, merges and summaries run as the owner. An
-- attacker's pass used them. A writer without the forget scope inserted a tombstone holding a fact's content hash,
-- so every agent's later write of that fact was refused as forgotten with no forget audited; and one source inserted
-- for a unit the writer cannot read made the owner-run audience trigger widen another persona's private unit to the
-- whole project. Neither grant is needed, so neither is kept; the role keeps its UPDATE of units, which a forget
-- tombstones through under the forget scope.
REVOKE INSERT ON memory_units FROM memory_app;
REVOKE INSERT, UPDATE ON memory_sources FROM memory_app;
DROP POLICY IF EXISTS insert_scope ON memory_units;
DROP POLICY IF EXISTS write_scope ON memory_sources;
