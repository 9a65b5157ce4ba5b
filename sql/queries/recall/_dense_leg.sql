-- The dense leg as common table expressions (ctx, dense_walked, dense_scan, dense_nearest, dense_exact, dense),
-- shared by recall/candidates and recall/dense (the leg alone: what bench/recall.py sets beside numpy's brute force;
-- a small project's request checks recall/dense_vectors' rows itself): the nearest vectors, sorted by distance alone
-- for a project under hnsw_min units or walked in the model's partial HNSW index above (memory_hnsw_walk, sql/020 and
-- sql/029), each probed for its unit; either falls back to the exact join of every vector with its unit when its
-- over-fetch leaves too few rows. {dim} and {model} are the model the query vector was encoded for; when another
-- model serves, the leg is empty. ctx carries the serving model, the project's size and the statement's snapshot.
ctx AS MATERIALIZED (
    SELECT {embeddings/_serving_model} AS model_key,
           coalesce(memory_last_number(%(project)s), 0) AS units,
           {recall/_snapshot} AS snapshot
), dense_walked AS MATERIALIZED (  -- from hnsw_min units: the vectors the walk of the model's index reaches first
    SELECT w.unit_id, w.unit_revision, w.content_hash, w.distance
    FROM memory_hnsw_walk(%(project)s, {model}, {dim}, %(vector)s::vector, %(overfetch)s,
                          (SELECT c.units FROM ctx c), %(walk_min_share)s) AS w
    WHERE %(dense)s::boolean AND (SELECT c.model_key = {model} AND c.units >= %(hnsw_min)s FROM ctx c)
), dense_scan AS MATERIALIZED (  -- under hnsw_min: the project's nearest vectors by distance alone, over-fetched
    SELECT e.unit_id, e.unit_revision, e.content_hash, e.embedding <=> %(vector)s::vector AS distance
    FROM memory_embeddings e
    WHERE e.model_key = {model} AND e.project = %(project)s
      AND %(dense)s::boolean AND (SELECT c.model_key = {model} AND c.units < %(hnsw_min)s FROM ctx c)
    ORDER BY distance
    FETCH FIRST %(exact_overfetch)s ROWS WITH TIES  -- a tie at the edge whole: the join's order (distance, number)
), dense_nearest AS MATERIALIZED (  -- either path's vectors (one of the two is empty), each probed for its unit and
                                    -- the filters (LoCoMo: the join of every vector with its unit, below, took ~1 ms
                                    -- more for the same rows)
    SELECT n.unit_id, n.distance, u.number, u.type = 'episodic' AS episodic
    FROM (SELECT * FROM dense_walked UNION ALL SELECT * FROM dense_scan) AS n
    CROSS JOIN LATERAL (  -- one primary-key probe per vector (the LIMIT keeps it one): joined, a generic plan that
                          -- guessed the project small hashed all its units (18 ms at 10,000)
        SELECT u.number, u.type FROM memory_units u
        WHERE u.id = n.unit_id AND u.revision = n.unit_revision AND u.content_hash = n.content_hash
          AND {recall/_unit_filters}
        LIMIT 1) AS u
    ORDER BY n.distance, u.number
    LIMIT (SELECT CASE WHEN c.units < %(hnsw_min)s THEN %(candidates)s::bigint ELSE %(hnsw_candidates)s::bigint END
           FROM ctx c)
), dense_exact AS MATERIALIZED (  -- the fallback: the over-fetch left fewer rows than asked while more vectors remain
    SELECT e.unit_id, e.embedding <=> %(vector)s::vector AS distance, u.number, u.type = 'episodic' AS episodic
    FROM memory_embeddings e
    JOIN memory_units u ON u.id = e.unit_id AND u.revision = e.unit_revision AND u.content_hash = e.content_hash
    WHERE e.model_key = {model} AND e.project = %(project)s AND {recall/_unit_filters}
      AND %(dense)s::boolean AND (SELECT c.model_key = {model} FROM ctx c)
      AND CASE WHEN (SELECT c.units < %(hnsw_min)s FROM ctx c)
               THEN (SELECT count(*) < %(candidates)s FROM dense_nearest)
                    AND (SELECT count(*) >= %(exact_overfetch)s FROM dense_scan)
               ELSE (SELECT count(*) < %(hnsw_candidates)s FROM dense_nearest) END
    ORDER BY distance, u.number
    LIMIT (SELECT CASE WHEN c.units < %(hnsw_min)s THEN %(candidates)s ELSE %(hnsw_candidates)s END FROM ctx c)
), dense AS MATERIALIZED (
    SELECT d.unit_id, d.distance, d.episodic, row_number() OVER (ORDER BY d.distance, d.number) AS rank
    FROM (SELECT * FROM dense_exact UNION ALL
          SELECT * FROM dense_nearest WHERE NOT EXISTS (SELECT 1 FROM dense_exact)) AS d
)
