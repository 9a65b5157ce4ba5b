-- A project's latest stored bundle revision: its number, content hash and bundle.
SELECT revision, content_hash, bundle
FROM memory_bundles
WHERE project = %(project)s
ORDER BY revision DESC
LIMIT 1;
