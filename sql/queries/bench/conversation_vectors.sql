-- The LoCoMo floor of the peer benchmark: a project's serving vectors of active units with the dialog ids they cite.
SELECT u.id::text, e.embedding,
       ARRAY(SELECT s.source_ref FROM memory_sources s WHERE s.unit_id = u.id AND s.source_ref IS NOT NULL) AS refs
FROM memory_embeddings e
JOIN memory_units u ON u.id = e.unit_id AND u.revision = e.unit_revision
WHERE u.project = %(project)s AND u.status = {status_active} AND e.model_key = %(model)s;
