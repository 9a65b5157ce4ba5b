-- The dense leg alone, in rank order: what a recall of a project whose units the full-text statement detailed all
-- sends once the question is encoded (legs.candidates_while_encoding), and what bench/recall.py times beside numpy's
-- brute force over the same vectors.
WITH {recall/_dense_leg}
SELECT unit_id::text, distance, episodic FROM dense ORDER BY rank;
