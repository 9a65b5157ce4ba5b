-- Store a new bundle revision of a project.
INSERT INTO memory_bundles (project, revision, content_hash, bundle, bytes, units)
VALUES (%(project)s, %(revision)s, %(content_hash)s, %(bundle)s, %(bytes)s, %(units)s);
