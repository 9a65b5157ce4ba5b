-- Delivery and measurement: bundles, event bookkeeping on units, the memory switch and arms per task.
ALTER TABLE memory_units ADD COLUMN IF NOT EXISTS last_injected_at timestamptz;
ALTER TABLE memory_sources ADD COLUMN IF NOT EXISTS visibility text NOT NULL DEFAULT 'project'
    CHECK (visibility IN ('project', 'private'));

CREATE TABLE IF NOT EXISTS memory_bundles (
    project      text NOT NULL,
    revision     integer NOT NULL,
    content_hash text NOT NULL,
    bundle       jsonb NOT NULL,
    bytes        integer NOT NULL,
    units        integer NOT NULL,
    compiled_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, revision)
);

CREATE TABLE IF NOT EXISTS memory_switch (
    scope  text NOT NULL CHECK (scope IN ('system', 'epic', 'task', 'kill', 'holdout')),
    key    text NOT NULL,              -- '' for system, kill and holdout
    value  text NOT NULL,              -- on | off (system/epic/task/kill), a percentage (holdout)
    PRIMARY KEY (scope, key)
);

CREATE TABLE IF NOT EXISTS memory_task_arms (
    task_id    text PRIMARY KEY,
    epic_id    text,
    value      text NOT NULL CHECK (value IN ('on', 'off')),
    source     text NOT NULL CHECK (source IN ('task', 'epic', 'default', 'killed', 'holdout')),
    decided_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS read_rate_metrics (
    day         date NOT NULL,
    project     text NOT NULL,
    kind        text NOT NULL,
    unit_id     uuid NOT NULL,
    arm         text NOT NULL,
    injections  integer NOT NULL,
    reads       integer NOT NULL,
    citations   integer NOT NULL,
    follows     integer NOT NULL,
    read_rate   double precision,
    kill        boolean NOT NULL,
    PRIMARY KEY (day, project, unit_id, arm)
);
ALTER TABLE memory_bundles ENABLE ROW LEVEL SECURITY;
ALTER TABLE read_rate_metrics ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_switch ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_task_arms ENABLE ROW LEVEL SECURITY;
