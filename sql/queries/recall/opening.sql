-- What a recall reads before it opens its transaction, in one round trip: whether the kill switch is on, and the
-- model recall serves (the one to encode the query with).
SELECT {events/_killed} AS killed, {embeddings/_serving_model} AS serving_model;
