-- A small project's nearest vectors by distance alone, over-fetched as recall/_dense_leg's dense_scan and not probed
-- for their units: what a recall whose full-text statement detailed every unit it may return sends after it
-- (legs.candidates_while_encoding). The caller keeps a vector whose unit is among those details (the filters and
-- row-level security applied there) at the revision and content hash the vector was written for, and ranks them as
-- the leg does, so each of ~250 probes of the units (~0.65 of ~1.45 ms on LoCoMo) is a lookup in the details; where
-- the over-fetch falls short it asks again for every vector, and where the two statements read different snapshots
-- (a commit between them in a caller's READ COMMITTED transaction) it sends recall/candidates instead. The scan is
-- dense_scan's, spelled here without the leg's other expressions (written as the leg's fragment and reading
-- dense_scan alone, it took 0.14 ms more: the plan's set-up). The first row is the serving model and the snapshot
-- alone, so a request sees a switch between its statements, then a row per vector by distance (none when the project
-- has no vectors of the query's model), without them (as recall/candidates' context row).
WITH ctx AS MATERIALIZED (
    SELECT {embeddings/_serving_model} AS model_key, {recall/_snapshot} AS snapshot
), nearest AS MATERIALIZED (
    SELECT e.unit_id, e.unit_revision, e.content_hash, e.embedding <=> %(vector)s::vector AS distance
    FROM memory_embeddings e
    WHERE e.model_key = {model} AND e.project = %(project)s AND (SELECT c.model_key = {model} FROM ctx c)
    ORDER BY distance
    FETCH FIRST %(exact_overfetch)s ROWS WITH TIES  -- a tie at the edge whole: the caller's order (distance, number)
)
SELECT c.model_key, c.snapshot, NULL AS unit_id, NULL AS distance, NULL AS unit_revision, NULL AS content_hash
FROM ctx c
UNION ALL  -- after the context row: an Append runs its branches in order (no parallel workers: request_context)
(SELECT NULL, NULL, n.unit_id::text, n.distance, n.unit_revision, n.content_hash FROM nearest n ORDER BY n.distance);
