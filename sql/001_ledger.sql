-- The ledger: units, their provenance, the post-gate inbox, rejection counts, canon texts and the audit log.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE IF NOT EXISTS memory_projects (
    project      text PRIMARY KEY CHECK (project ~ '^[A-Za-z0-9][A-Za-z0-9._-]*$' AND char_length(project) <= 64),
    last_number  bigint NOT NULL DEFAULT 0,  -- per-project token counter: mem-<n>
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE OR REPLACE FUNCTION memory_text_of(text[]) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT coalesce(array_to_string($1, ' '), '') $$;

CREATE TABLE IF NOT EXISTS memory_units (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    project         text NOT NULL REFERENCES memory_projects (project),
    number          bigint NOT NULL CHECK (number > 0),
    type            text NOT NULL CHECK (type IN ('episodic', 'semantic', 'procedural')),
    kind            text NOT NULL CHECK (kind IN ('codemap', 'gotcha', 'recipe', 'env', 'qa', 'note')),
    title           text NOT NULL CHECK (char_length(title) <= 80),
    body            text NOT NULL CHECK (char_length(body) <= 1200),
    paths           text[] NOT NULL DEFAULT '{}',
    keywords        text[] NOT NULL DEFAULT '{}',
    personas        text[] NOT NULL DEFAULT '{}',
    status          text NOT NULL CHECK (status IN ('proposed', 'review', 'active', 'flagged', 'stale',
                                                    'superseded', 'retired', 'forgotten')),
    confidence      real NOT NULL CHECK (confidence BETWEEN 0 AND 1),
    importance      real NOT NULL CHECK (importance BETWEEN 0 AND 1),
    trust           real NOT NULL CHECK (trust BETWEEN 0 AND 1),
    confirms        integer NOT NULL DEFAULT 0 CHECK (confirms >= 0),
    flags           integer NOT NULL DEFAULT 0 CHECK (flags >= 0),
    revision        integer NOT NULL DEFAULT 1 CHECK (revision >= 1),
    content_hash    text NOT NULL,
    valid_from      timestamptz NOT NULL DEFAULT now(),
    valid_until     timestamptz,
    supersedes_id   uuid REFERENCES memory_units (id),
    conflicts_with  uuid REFERENCES memory_units (id),
    duplicate_of    uuid REFERENCES memory_units (id),
    origin_inbox_id bigint,
    created_by      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_by      text,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    tsv             tsvector GENERATED ALWAYS AS (
                        setweight(to_tsvector('english', title), 'A')
                        || setweight(to_tsvector('english', memory_text_of(keywords)), 'B')
                        || setweight(to_tsvector('english', body), 'C')) STORED,
    UNIQUE (project, number),
    -- only a forgotten tombstone may be blank
    CHECK (status = 'forgotten' OR (btrim(title) <> '' AND btrim(body) <> '')),
    CHECK (valid_until IS NULL OR valid_until >= valid_from)
);
-- Invariant 4: one live unit per (project, kind, content).
CREATE UNIQUE INDEX IF NOT EXISTS memory_units_live_content
    ON memory_units (project, kind, content_hash)
    WHERE status IN ('proposed', 'review', 'active', 'flagged', 'stale');
CREATE INDEX IF NOT EXISTS memory_units_active ON memory_units (project, kind) WHERE status = 'active';
CREATE INDEX IF NOT EXISTS memory_units_tsv ON memory_units USING gin (tsv);
CREATE INDEX IF NOT EXISTS memory_units_created_day ON memory_units (((created_at AT TIME ZONE 'UTC')::date));

CREATE TABLE IF NOT EXISTS memory_inbox (
    id               bigserial PRIMARY KEY,
    idempotency_key  text NOT NULL UNIQUE,  -- sha256(project|task|kind|content): a replay is a no-op
    project          text NOT NULL,
    feed             text NOT NULL,
    task_id          text,
    session_id       text,
    persona          text,
    model            text,
    observed_sha     text,
    source_ref       text,
    type             text NOT NULL,
    kind             text NOT NULL,
    title            text NOT NULL,
    body             text NOT NULL,
    paths            text[] NOT NULL DEFAULT '{}',
    keywords         text[] NOT NULL DEFAULT '{}',
    confidence       real NOT NULL,
    importance       real NOT NULL,
    status           text NOT NULL,  -- the status a new unit gets
    content_hash     text NOT NULL,
    valid_from       timestamptz,
    received_at      timestamptz NOT NULL DEFAULT now(),
    unit_id          uuid REFERENCES memory_units (id),  -- set once folded into the ledger
    outcome          text CHECK (outcome IN ('inserted', 'duplicate')),
    folded_at        timestamptz
);
CREATE INDEX IF NOT EXISTS memory_inbox_unfolded_day
    ON memory_inbox (((received_at AT TIME ZONE 'UTC')::date)) WHERE unit_id IS NULL;
CREATE INDEX IF NOT EXISTS memory_inbox_day ON memory_inbox (((received_at AT TIME ZONE 'UTC')::date));

CREATE TABLE IF NOT EXISTS memory_sources (
    id            bigserial PRIMARY KEY,
    unit_id       uuid NOT NULL REFERENCES memory_units (id),
    project       text NOT NULL,
    feed          text NOT NULL,
    task_id       text,
    session_id    text,
    persona       text,
    model         text,
    observed_sha  text,
    source_ref    text,  -- an external reference such as a dialog turn id
    inbox_id      bigint REFERENCES memory_inbox (id),
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE NULLS NOT DISTINCT (unit_id, task_id)
);

CREATE TABLE IF NOT EXISTS memory_rejections (
    project  text NOT NULL,
    feed     text NOT NULL,
    reason   text NOT NULL,
    day      date NOT NULL,
    count    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (project, feed, reason, day)
);

-- Canon texts (READMEs, ADRs) are stored only as hashed token sets: enough for Jaccard, no text kept.
CREATE TABLE IF NOT EXISTS memory_canon (
    project       text NOT NULL,
    path          text NOT NULL,
    chunk         integer NOT NULL,
    token_hashes  bigint[] NOT NULL,
    registered_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, path, chunk)
);

CREATE TABLE IF NOT EXISTS audit_log (
    id       bigserial PRIMARY KEY,
    at       timestamptz NOT NULL DEFAULT now(),
    actor    text,
    action   text NOT NULL,
    project  text,
    unit_id  uuid,
    reason   text,
    details  jsonb NOT NULL DEFAULT '{}'  -- ids only, never titles or bodies
);
CREATE OR REPLACE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only';
END $$;
DROP TRIGGER IF EXISTS audit_log_append_only ON audit_log;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
