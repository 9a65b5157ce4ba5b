-- Whether %(new_id)s has fewer readers than %(old_id)s (some reader of the old unit could not read its replacement).
SELECT NOT (n.private_to IS NULL OR (o.private_to IS NOT NULL AND n.private_to @> o.private_to))
FROM memory_units n, memory_units o
WHERE n.id = %(new_id)s::uuid AND o.id = %(old_id)s::uuid;
