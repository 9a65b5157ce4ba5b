-- Fragment: the model recall serves, as an SQL expression (a database setting, so every worker agrees), read
-- with serving_key and serving_default from embeddings.SERVING_MODEL_PARAMS.
coalesce((SELECT value FROM memory_settings WHERE key = %(serving_key)s::text), %(serving_default)s::text)
