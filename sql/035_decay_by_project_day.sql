-- A current recall in a small project reads each unit's recency on the project's latest decay day in one range
-- (sql/queries/recall/candidates.sql, `latest`) instead of one probe of decay_scores_unit_day per unit: by project,
-- then day, so the latest day is the index's last entry of the project and that day's rows one range after it. A
-- plain build, as every migration runs in a transaction: it holds off the daily decay job's writes while it runs,
-- never a read.
CREATE INDEX IF NOT EXISTS decay_scores_project_day ON decay_scores (project, day);
