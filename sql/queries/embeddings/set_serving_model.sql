-- Make %(model)s the serving model (the setting stored under %(serving_key)s).
INSERT INTO memory_settings (key, value) VALUES (%(serving_key)s::text, %(model)s::text)
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now();
