-- The dense leg alone, in rank order: what a recall of a project whose units the full-text statement detailed all
-- sends once the question is encoded (legs.candidates_while_encoding), and what bench/recall.py times beside numpy's
-- brute force over the same vectors.
-- The serving model comes first (a row of NULLs after it when the leg is empty), so a request sees a switch between
-- its statements.
WITH {recall/_dense_leg}
SELECT c.model_key, d.unit_id::text, d.distance, d.episodic FROM ctx c LEFT JOIN dense d ON true ORDER BY d.rank;
