-- A server function that changes is kept as one file, sql/functions/<name>.sql, its current definition: every
-- migration up to sql/041 that changed a function copied its whole body again (memory_fold four times, the one-row
-- write five), so the current text was the latest copy among the migrations. migrate() applies each function file
-- after the numbered migrations (in the newest one's transaction when it was just applied), again whenever its text
-- changes or a numbered migration has run since (which may have carried an older copy), and never from a build older
-- than the store (a process of the release before, still running through a rolling deploy, would put its copy
-- back). So each edit of a function file comes with a numbered migration like this one, which says why and adds
-- what the new body reads.
--
-- memory_fold (sql/040's, which remember_many, `import`, the daily ledger fold and a replayed remember() run) is the
-- first such file. It now probes for forgotten content, and buries rows, only in the projects where some unit was
-- ever forgotten (memory_projects.holds_forgotten, sql/041), as remember()'s one-row write does: the flag is read under
-- the counter rows' lock, which a forget takes before it tombstones. A project whose tombstones came with triggers
-- off (a data-only restore with --disable-triggers) is unflagged, and the check no_text_in_tombstones reports it
-- ("unguarded project"; the README gives the repair). docs/scaling.md item 48 has the costs.
--
-- The function files' texts this migration stands for (tests/test_database.py checks that the newest migration
-- naming a file records its current SHA-256, so no file changes without a migration):
-- sql/functions/memory_fold.sql sha256 d51568382eec2428bacb1110d0a4d8cfefda62d84e5a2de0a32bc9582ef7a5d3

-- Each function file applied: its text's SHA-256, the newest numbered migration it was applied after, and a digest
-- of the body it made (a function replaced by hand since is applied again).
CREATE TABLE IF NOT EXISTS schema_functions (
    name        text PRIMARY KEY,
    checksum    text NOT NULL,
    migrated_to int NOT NULL,
    body_md5    text,
    applied_at  timestamptz NOT NULL DEFAULT now()
);
