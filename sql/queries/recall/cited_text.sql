-- The top hits' text, validity and citations (only the sources their reader may see).
SELECT u.id::text AS unit_id, {token_prefix} || u.number AS token, u.title, u.body, u.kind, u.type,
       u.valid_from, u.valid_until, u.status,
       (SELECT json_agg(json_build_object('feed', s.feed, 'task_id', s.task_id, 'session_id', s.session_id,
                                          'persona', s.persona, 'commit', s.observed_sha, 'source_ref', s.source_ref)
                        ORDER BY s.id)
        FROM memory_sources s WHERE s.unit_id = u.id AND {recall/_visible_source}) AS citations
FROM memory_units u
WHERE u.id = ANY (%(ids)s::uuid[]);
