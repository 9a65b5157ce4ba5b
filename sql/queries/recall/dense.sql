-- The dense leg alone, in rank order: what bench/recall.py times beside numpy's brute force over the same vectors.
WITH {recall/_dense_leg}
SELECT unit_id::text, distance, episodic FROM dense ORDER BY rank;
