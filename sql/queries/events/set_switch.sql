-- Set one memory switch (scope, key) to a value, replacing the previous one.
INSERT INTO memory_switch (scope, key, value)
VALUES (%(scope)s, %(key)s, %(value)s)
ON CONFLICT (scope, key) DO UPDATE SET value = EXCLUDED.value;
