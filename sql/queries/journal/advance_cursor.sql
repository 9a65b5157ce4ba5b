-- Record that %(consumer)s finished every change up to (%(xid)s, %(seq)s).
INSERT INTO memory_cursors (consumer, xid, seq) VALUES (%(consumer)s::text, %(xid)s::text::xid8, %(seq)s::bigint)
ON CONFLICT (consumer) DO UPDATE SET xid = EXCLUDED.xid, seq = EXCLUDED.seq, updated_at = now();
