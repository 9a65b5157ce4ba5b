-- What a write reads before its gates run, in one round trip: whether the kill switch is on, and the project's
-- canon version and chunks, read together (one row each; one row with no chunk when the project has none).
SELECT {events/_killed} AS killed,
       (SELECT p.canon_version FROM memory_projects p WHERE p.project = %(project)s) AS canon_version,
       c.token_hashes
FROM (SELECT 1) AS request
LEFT JOIN memory_canon c ON c.project = %(project)s;
