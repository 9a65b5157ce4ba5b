-- The dense leg alone, in rank order: what bench/recall.py times beside numpy's brute force over the same vectors (a
-- recall of a project whose units the full-text statement detailed all sends recall/dense_vectors instead, and
-- checks each vector against those details itself).
-- The serving model comes first (a row of NULLs after it when the leg is empty), so a request sees a switch between
-- its statements.
WITH {recall/_dense_leg}
SELECT c.model_key, d.unit_id::text, d.distance, d.episodic FROM ctx c LEFT JOIN dense d ON true ORDER BY d.rank;
