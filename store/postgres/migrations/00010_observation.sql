-- +goose Up
-- Observation data (seed 003), the PostgreSQL mirror of store/sqlite's
-- 00010_observation.sql. It lives beside the immutable step rows, never in
-- them. Rows bound to a step go with it (ON DELETE CASCADE from steps, which
-- cascades from sessions); each referencing column is indexed so a truncate
-- or session delete finds them without a scan. seq is the insertion order
-- that lists follow (SQLite's rowid); an upsert keeps it.

-- Evals of a step, a run or a session. step_id is set for step targets only
-- (the cascade); run_id is the run of the target, for filtering.
CREATE TABLE evals (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY,
    id          TEXT COLLATE "C" PRIMARY KEY,
    session_id  TEXT COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    step_id     TEXT COLLATE "C" REFERENCES steps (id) ON DELETE CASCADE,
    run_id      TEXT COLLATE "C" NOT NULL DEFAULT '',
    target_kind TEXT NOT NULL CHECK (target_kind IN ('step', 'run', 'session')),
    target_id   TEXT COLLATE "C" NOT NULL,
    name        TEXT NOT NULL,
    source      TEXT NOT NULL CHECK (source IN ('user', 'llm-judge', 'heuristic')),
    score       DOUBLE PRECISION NOT NULL CHECK (score >= 0 AND score <= 1),
    label       TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    author      TEXT NOT NULL DEFAULT '',
    details     BYTEA,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
CREATE INDEX evals_target ON evals (target_id, target_kind);
CREATE INDEX evals_session ON evals (session_id, seq);
CREATE INDEX evals_step ON evals (step_id) WHERE step_id IS NOT NULL;
CREATE INDEX evals_run ON evals (run_id) WHERE run_id <> '';

-- Annotations set after a step committed, and model-written summaries.
CREATE TABLE step_annotations (
    seq            BIGINT GENERATED ALWAYS AS IDENTITY,
    step_id        TEXT COLLATE "C" PRIMARY KEY REFERENCES steps (id) ON DELETE CASCADE,
    session_id     TEXT COLLATE "C" NOT NULL,
    state          TEXT NOT NULL DEFAULT '',
    state_summary  TEXT NOT NULL DEFAULT '',
    goal           TEXT NOT NULL DEFAULT '',
    goal_summary   TEXT NOT NULL DEFAULT '',
    action         TEXT NOT NULL DEFAULT '',
    action_summary TEXT NOT NULL DEFAULT '',
    updated_at     BIGINT NOT NULL
);
CREATE INDEX step_annotations_session ON step_annotations (session_id);

-- Content-addressed blobs: screenshots, files, large event payloads.
CREATE TABLE blobs (
    hash         TEXT COLLATE "C" PRIMARY KEY, -- lowercase hex SHA-256 of data
    size         BIGINT NOT NULL,
    content_type TEXT NOT NULL,
    data         BYTEA NOT NULL,
    created_at   BIGINT NOT NULL
);

CREATE TABLE attachments (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY,
    id           TEXT COLLATE "C" PRIMARY KEY,
    step_id      TEXT COLLATE "C" NOT NULL REFERENCES steps (id) ON DELETE CASCADE,
    session_id   TEXT COLLATE "C" NOT NULL,
    run_id       TEXT COLLATE "C" NOT NULL DEFAULT '',
    name         TEXT NOT NULL,
    kind         TEXT NOT NULL,
    content_type TEXT NOT NULL,
    size         BIGINT NOT NULL,
    blob_hash    TEXT COLLATE "C" NOT NULL REFERENCES blobs (hash),
    created_at   BIGINT NOT NULL
);
CREATE INDEX attachments_step ON attachments (step_id);
CREATE INDEX attachments_session ON attachments (session_id);
CREATE INDEX attachments_blob ON attachments (blob_hash);

-- Events inside a step. payload holds JSON up to 64 KiB; larger payloads
-- are in blobs under blob_hash.
CREATE TABLE step_events (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY,
    id          TEXT COLLATE "C" PRIMARY KEY,
    step_id     TEXT COLLATE "C" NOT NULL REFERENCES steps (id) ON DELETE CASCADE,
    session_id  TEXT COLLATE "C" NOT NULL,
    run_id      TEXT COLLATE "C" NOT NULL DEFAULT '',
    idx         BIGINT NOT NULL,
    type        TEXT NOT NULL,
    name        TEXT NOT NULL DEFAULT '',
    attempt     INTEGER NOT NULL DEFAULT 0,
    started_at  BIGINT NOT NULL DEFAULT 0,
    duration    BIGINT NOT NULL DEFAULT 0, -- nanoseconds
    error       TEXT NOT NULL DEFAULT '',
    payload     BYTEA,
    blob_hash   TEXT COLLATE "C" REFERENCES blobs (hash),
    size        BIGINT NOT NULL DEFAULT 0,
    created_at  BIGINT NOT NULL,
    UNIQUE (step_id, idx)
);
CREATE INDEX step_events_run ON step_events (run_id) WHERE run_id <> '';
CREATE INDEX step_events_session ON step_events (session_id);
CREATE INDEX step_events_blob ON step_events (blob_hash) WHERE blob_hash IS NOT NULL;

-- Datasets of inputs with optional expected outputs, and experiments that
-- ran an agent over them.
CREATE TABLE datasets (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY,
    id          TEXT COLLATE "C" PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    description TEXT NOT NULL DEFAULT '',
    item_count  BIGINT NOT NULL,
    created_at  BIGINT NOT NULL
);

CREATE TABLE dataset_items (
    dataset_id TEXT COLLATE "C" NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,
    idx        BIGINT NOT NULL,
    input      TEXT NOT NULL,
    expected   TEXT NOT NULL DEFAULT '',
    metadata   BYTEA,
    PRIMARY KEY (dataset_id, idx)
);

CREATE TABLE experiments (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY,
    id          TEXT COLLATE "C" PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    dataset_id  TEXT COLLATE "C" NOT NULL REFERENCES datasets (id),
    agent       TEXT NOT NULL,
    status      TEXT NOT NULL,
    config      BYTEA,
    summary     BYTEA,
    error       TEXT NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    finished_at BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX experiments_dataset ON experiments (dataset_id);

CREATE TABLE experiment_items (
    experiment_id TEXT COLLATE "C" NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    idx           BIGINT NOT NULL,
    session_id    TEXT COLLATE "C" NOT NULL DEFAULT '',
    run_id        TEXT COLLATE "C" NOT NULL DEFAULT '',
    status        TEXT NOT NULL,
    output        TEXT NOT NULL DEFAULT '',
    error         TEXT NOT NULL DEFAULT '',
    scores        BYTEA, -- JSON object: eval name → score
    duration      BIGINT NOT NULL DEFAULT 0, -- nanoseconds
    input_tokens  BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    cost          DOUBLE PRECISION NOT NULL DEFAULT 0,
    updated_at    BIGINT NOT NULL,
    PRIMARY KEY (experiment_id, idx)
);

-- +goose Down
-- Forward-only: Stepwise never runs a Down migration; this documents the
-- inverse for a manual rollback.
DROP TABLE experiment_items;
DROP TABLE experiments;
DROP TABLE dataset_items;
DROP TABLE datasets;
DROP TABLE step_events;
DROP TABLE attachments;
DROP TABLE blobs;
DROP TABLE step_annotations;
DROP TABLE evals;
