-- Count rejected candidates per (project, feed, reason, day); the text itself is never stored.
INSERT INTO memory_rejections (project, feed, reason, day, count)
VALUES (%(project)s, %(feed)s, %(reason)s, current_date, %(count)s)
ON CONFLICT (project, feed, reason, day) DO UPDATE SET count = memory_rejections.count + EXCLUDED.count;
