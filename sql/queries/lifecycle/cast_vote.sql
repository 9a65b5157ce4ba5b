-- Cast or change one task's vote on a unit (a trigger appends the change to memory_vote_history, sql/039); returns 1
-- when the vote was new or changed, else 0.
WITH cast_vote AS (
    INSERT INTO memory_votes (unit_id, project, task_id, vote, actor)
    VALUES (%(unit_id)s, %(project)s, %(task_id)s, %(vote)s, %(actor)s)
    ON CONFLICT (unit_id, task_id) DO UPDATE SET vote = EXCLUDED.vote, at = now()
    WHERE memory_votes.vote <> EXCLUDED.vote
    RETURNING 1
)
SELECT count(*) FROM cast_vote;
