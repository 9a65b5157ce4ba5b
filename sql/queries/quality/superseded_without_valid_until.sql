-- Superseded units that never got their valid_until.
SELECT id::text FROM memory_units WHERE status = {status_superseded} AND valid_until IS NULL;
