-- The project's counter row, shared, until commit: a merge or a review takes it before any unit's row, as a fold, a
-- remember() and a forget hold it before theirs; a unit updated twice in one transaction has its project's foreign
-- key checked again, which reads this row, and a write that held it while it waited for the unit deadlocked.
SELECT 1 FROM memory_projects WHERE project = %(project)s FOR KEY SHARE;
