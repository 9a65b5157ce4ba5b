-- Recall reads every candidate's latest decay score in its one statement (sql/queries/recall/candidates.sql): by
-- unit, newest day first, instead of scanning decay_scores, whose key leads with the day.
CREATE INDEX IF NOT EXISTS decay_scores_unit_day ON decay_scores (unit_id, day DESC);
