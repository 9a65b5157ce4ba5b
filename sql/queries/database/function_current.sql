-- Whether a sql/functions file is to be left as it is: the store is newer than this build (its numbered migrations
-- past the build's newest, %(build)s: an older process still running must not put back its older copy), or the file's
-- text is the one applied after the store's newest numbered migration and the function's body is still the one it
-- made (a CREATE OR REPLACE by hand is undone at the next connect).
SELECT 1
WHERE (SELECT max(version) FROM schema_migrations) > %(build)s
   OR EXISTS (SELECT 1 FROM schema_functions
              WHERE name = %(name)s AND checksum = %(checksum)s
                AND migrated_to >= (SELECT max(version) FROM schema_migrations)
                AND body_md5 IS NOT DISTINCT FROM {database/_function_body})
