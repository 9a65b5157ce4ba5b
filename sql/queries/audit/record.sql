-- One audit row: who did what to which unit and why, with ids and reasons only (never titles or bodies).
INSERT INTO audit_log (actor, action, project, unit_id, reason, details)
VALUES (%(actor)s, %(action)s, %(project)s, %(unit_id)s::uuid, %(reason)s, %(details)s::jsonb);
