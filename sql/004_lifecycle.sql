-- Lifecycle: votes and trust, usage events, decay scores, consolidation clusters, forget without resurrection.

-- Triggers that touch other tables run as their owner, so a request under RLS (memory_app) can fire them.
ALTER FUNCTION memory_units_forget_vectors() SECURITY DEFINER SET search_path = public;
ALTER FUNCTION memory_units_journal() SECURITY DEFINER SET search_path = public;

ALTER TABLE memory_units ADD COLUMN IF NOT EXISTS last_confirmed_at timestamptz;
ALTER TABLE memory_units ADD COLUMN IF NOT EXISTS last_used_at timestamptz;
ALTER TABLE memory_units ADD COLUMN IF NOT EXISTS expired_at timestamptz;       -- episodic TTL passed (row kept)
ALTER TABLE memory_units ADD COLUMN IF NOT EXISTS consolidated_into uuid REFERENCES memory_units (id);

ALTER TABLE memory_inbox DROP CONSTRAINT IF EXISTS memory_inbox_outcome_check;
ALTER TABLE memory_inbox ADD CONSTRAINT memory_inbox_outcome_check
    CHECK (outcome IN ('inserted', 'duplicate', 'forgotten'));

CREATE TABLE IF NOT EXISTS memory_votes (
    unit_id  uuid NOT NULL REFERENCES memory_units (id),
    project  text NOT NULL,
    task_id  text NOT NULL,
    vote     smallint NOT NULL CHECK (vote IN (-1, 1)),
    actor    text,
    at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (unit_id, task_id)          -- one vote per unit and task, under any concurrency
);

CREATE TABLE IF NOT EXISTS memory_events (
    id          bigserial PRIMARY KEY,
    unit_id     uuid NOT NULL REFERENCES memory_units (id),
    project     text NOT NULL,
    task_id     text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('injected', 'read', 'cited', 'followed')),
    channel     text,
    session_id  text,
    provisional boolean NOT NULL DEFAULT false,
    at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (task_id, unit_id, kind)
);
CREATE INDEX IF NOT EXISTS memory_events_unit ON memory_events (unit_id, at);

CREATE TABLE IF NOT EXISTS decay_scores (
    day          date NOT NULL,
    unit_id      uuid NOT NULL REFERENCES memory_units (id),
    project      text NOT NULL,
    recency      double precision NOT NULL,
    activation   double precision NOT NULL,
    trust        double precision NOT NULL,
    expired      boolean NOT NULL,
    stale        boolean NOT NULL,
    score        double precision NOT NULL,
    PRIMARY KEY (day, unit_id)
);

CREATE TABLE IF NOT EXISTS consolidation_clusters (
    week_start        date NOT NULL,
    project           text NOT NULL,
    cluster           integer NOT NULL,
    consolidated_unit uuid NOT NULL REFERENCES memory_units (id),
    members           uuid[] NOT NULL,
    PRIMARY KEY (week_start, project, cluster)
);

GRANT SELECT ON decay_scores TO memory_app;
ALTER TABLE decay_scores ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS read_scope ON decay_scores;
CREATE POLICY read_scope ON decay_scores FOR SELECT TO memory_app USING (project = ANY (memory_scope('read')));
ALTER TABLE memory_votes ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_events ENABLE ROW LEVEL SECURITY;
ALTER TABLE consolidation_clusters ENABLE ROW LEVEL SECURITY;
