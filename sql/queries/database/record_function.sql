-- A sql/functions file applied: its checksum, the newest numbered migration it was applied after, and a digest of
-- the body it made.
INSERT INTO schema_functions (name, checksum, migrated_to, body_md5)
VALUES (%(name)s, %(checksum)s, (SELECT max(version) FROM schema_migrations), {database/_function_body})
ON CONFLICT (name) DO UPDATE SET checksum = EXCLUDED.checksum, migrated_to = EXCLUDED.migrated_to,
                                 body_md5 = EXCLUDED.body_md5, applied_at = now()
