-- Cast or change one task's vote on a unit, appending the change to the vote history (a past day's decay reads the
-- votes as they stood then); returns 1 when the vote was new or changed, else 0.
WITH cast_vote AS (
    INSERT INTO memory_votes (unit_id, project, task_id, vote, actor)
    VALUES (%(unit_id)s, %(project)s, %(task_id)s, %(vote)s, %(actor)s)
    ON CONFLICT (unit_id, task_id) DO UPDATE SET vote = EXCLUDED.vote, at = now()
    WHERE memory_votes.vote <> EXCLUDED.vote
    RETURNING unit_id, project, task_id, vote, at
), logged AS (
    INSERT INTO memory_vote_history (unit_id, project, task_id, vote, at)
    SELECT unit_id, project, task_id, vote, at FROM cast_vote
)
SELECT count(*) FROM cast_vote;
