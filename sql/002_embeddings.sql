-- Version-bound vectors, the change journal, settings and curation bookkeeping.

-- Every text change bumps the revision, whoever writes it: a vector bound to an older revision is never served.
CREATE OR REPLACE FUNCTION memory_units_bump_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.title, NEW.body, NEW.keywords, NEW.kind) IS DISTINCT FROM (OLD.title, OLD.body, OLD.keywords, OLD.kind)
       AND NEW.revision = OLD.revision THEN
        NEW.revision := OLD.revision + 1;
    END IF;
    NEW.updated_at := now();
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS memory_units_bump_revision ON memory_units;
CREATE TRIGGER memory_units_bump_revision BEFORE UPDATE ON memory_units
    FOR EACH ROW EXECUTE FUNCTION memory_units_bump_revision();

CREATE TABLE IF NOT EXISTS memory_embeddings (
    unit_id        uuid NOT NULL REFERENCES memory_units (id) ON DELETE CASCADE,
    model_key      text NOT NULL,           -- name@revision+text version, e.g. minilm-l6@t1
    unit_revision  integer NOT NULL,        -- the unit revision the text was read at
    content_hash   text NOT NULL,           -- the unit's content hash at that revision
    text_digest    text NOT NULL,           -- sha256 of the exact text that was embedded
    model_name     text NOT NULL,
    model_revision text NOT NULL,
    dim            integer NOT NULL CHECK (dim > 0),
    embedding      vector NOT NULL CHECK (vector_dims(embedding) = dim),
    embedded_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (unit_id, model_key)
);
CREATE INDEX IF NOT EXISTS memory_embeddings_model ON memory_embeddings (model_key);

-- Forgetting a unit deletes its vectors in the same transaction.
CREATE OR REPLACE FUNCTION memory_units_forget_vectors() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'forgotten' AND OLD.status IS DISTINCT FROM 'forgotten' THEN
        DELETE FROM memory_embeddings WHERE unit_id = NEW.id;
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS memory_units_forget_vectors ON memory_units;
CREATE TRIGGER memory_units_forget_vectors AFTER UPDATE OF status ON memory_units
    FOR EACH ROW EXECUTE FUNCTION memory_units_forget_vectors();

-- The change journal: an immutable sequence of unit changes that consumers page through with cursors.
CREATE TABLE IF NOT EXISTS memory_changes (
    seq        bigserial PRIMARY KEY,
    unit_id    uuid NOT NULL,                -- no foreign key: a deleted unit still advances the cursor
    project    text NOT NULL,
    revision   integer NOT NULL,
    status     text NOT NULL,
    change     text NOT NULL CHECK (change IN ('insert', 'update', 'delete')),
    xid        xid8 NOT NULL DEFAULT pg_current_xact_id(),  -- pages stop below the oldest running transaction
    at         timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS memory_changes_xid_seq ON memory_changes (xid, seq);
CREATE OR REPLACE FUNCTION memory_units_journal() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO memory_changes (unit_id, project, revision, status, change)
        VALUES (OLD.id, OLD.project, OLD.revision, OLD.status, 'delete');
        RETURN OLD;
    ELSIF TG_OP = 'INSERT' OR (NEW.revision, NEW.status) IS DISTINCT FROM (OLD.revision, OLD.status) THEN
        INSERT INTO memory_changes (unit_id, project, revision, status, change)
        VALUES (NEW.id, NEW.project, NEW.revision, NEW.status, lower(TG_OP));
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS memory_units_journal ON memory_units;
CREATE TRIGGER memory_units_journal AFTER INSERT OR UPDATE OR DELETE ON memory_units
    FOR EACH ROW EXECUTE FUNCTION memory_units_journal();

CREATE TABLE IF NOT EXISTS memory_cursors (
    consumer   text PRIMARY KEY,
    xid        xid8 NOT NULL DEFAULT '0',
    seq        bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Settings every worker must agree on (the serving model), kept in the database, not in process memory.
CREATE TABLE IF NOT EXISTS memory_settings (
    key        text PRIMARY KEY,
    value      text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE memory_units ADD COLUMN IF NOT EXISTS curated_revision integer;  -- revision curation last looked at
