-- Fragment: the units (alias u) that hold vectors: all but tombstones (superseded units keep theirs, since as_of
-- recall serves them).
u.status <> {status_forgotten}
