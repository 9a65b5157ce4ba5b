-- A sql/functions file applied: its checksum and the newest numbered migration it was applied after.
INSERT INTO schema_functions (name, checksum, migrated_to)
VALUES (%(name)s, %(checksum)s, (SELECT max(version) FROM schema_migrations))
ON CONFLICT (name) DO UPDATE SET checksum = EXCLUDED.checksum, migrated_to = EXCLUDED.migrated_to, applied_at = now()
