-- +goose Up
-- Observation data (seed 003) lives beside the immutable step rows, never in
-- them. Rows bound to a step go with it (ON DELETE CASCADE from steps, which
-- cascades from sessions); each referencing column is indexed so a truncate
-- or session delete finds them without a scan.

-- Evals of a step, a run or a session. step_id is set for step targets only
-- (the cascade); run_id is the run of the target, for filtering.
CREATE TABLE evals (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    step_id     TEXT REFERENCES steps (id) ON DELETE CASCADE,
    run_id      TEXT NOT NULL DEFAULT '',
    target_kind TEXT NOT NULL CHECK (target_kind IN ('step', 'run', 'session')),
    target_id   TEXT NOT NULL,
    name        TEXT NOT NULL,
    source      TEXT NOT NULL CHECK (source IN ('user', 'llm-judge', 'heuristic')),
    score       REAL NOT NULL CHECK (score >= 0 AND score <= 1),
    label       TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    author      TEXT NOT NULL DEFAULT '',
    details     BLOB,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX evals_target ON evals (target_id, target_kind);
CREATE INDEX evals_session ON evals (session_id);
CREATE INDEX evals_step ON evals (step_id) WHERE step_id IS NOT NULL;
CREATE INDEX evals_run ON evals (run_id) WHERE run_id <> '';

-- Annotations set after a step committed, and model-written summaries.
CREATE TABLE step_annotations (
    step_id        TEXT PRIMARY KEY REFERENCES steps (id) ON DELETE CASCADE,
    session_id     TEXT NOT NULL,
    state          TEXT NOT NULL DEFAULT '',
    state_summary  TEXT NOT NULL DEFAULT '',
    goal           TEXT NOT NULL DEFAULT '',
    goal_summary   TEXT NOT NULL DEFAULT '',
    action         TEXT NOT NULL DEFAULT '',
    action_summary TEXT NOT NULL DEFAULT '',
    updated_at     INTEGER NOT NULL
) STRICT;
CREATE INDEX step_annotations_session ON step_annotations (session_id);

-- Content-addressed blobs: screenshots, files, large event payloads.
CREATE TABLE blobs (
    hash         TEXT PRIMARY KEY, -- lowercase hex SHA-256 of data
    size         INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    data         BLOB NOT NULL,
    created_at   INTEGER NOT NULL
) STRICT;

CREATE TABLE attachments (
    id           TEXT PRIMARY KEY,
    step_id      TEXT NOT NULL REFERENCES steps (id) ON DELETE CASCADE,
    session_id   TEXT NOT NULL,
    run_id       TEXT NOT NULL DEFAULT '',
    name         TEXT NOT NULL,
    kind         TEXT NOT NULL,
    content_type TEXT NOT NULL,
    size         INTEGER NOT NULL,
    blob_hash    TEXT NOT NULL REFERENCES blobs (hash),
    created_at   INTEGER NOT NULL
) STRICT;
CREATE INDEX attachments_step ON attachments (step_id);
CREATE INDEX attachments_session ON attachments (session_id);
CREATE INDEX attachments_blob ON attachments (blob_hash);

-- Events inside a step. payload holds JSON up to 64 KiB; larger payloads
-- are in blobs under blob_hash.
CREATE TABLE step_events (
    id          TEXT PRIMARY KEY,
    step_id     TEXT NOT NULL REFERENCES steps (id) ON DELETE CASCADE,
    session_id  TEXT NOT NULL,
    run_id      TEXT NOT NULL DEFAULT '',
    idx         INTEGER NOT NULL,
    type        TEXT NOT NULL,
    name        TEXT NOT NULL DEFAULT '',
    attempt     INTEGER NOT NULL DEFAULT 0,
    started_at  INTEGER NOT NULL DEFAULT 0,
    duration    INTEGER NOT NULL DEFAULT 0, -- nanoseconds
    error       TEXT NOT NULL DEFAULT '',
    payload     BLOB,
    blob_hash   TEXT REFERENCES blobs (hash),
    size        INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    UNIQUE (step_id, idx)
) STRICT;
CREATE INDEX step_events_run ON step_events (run_id) WHERE run_id <> '';
CREATE INDEX step_events_session ON step_events (session_id);
CREATE INDEX step_events_blob ON step_events (blob_hash) WHERE blob_hash IS NOT NULL;

-- Datasets of inputs with optional expected outputs, and experiments that
-- ran an agent over them.
CREATE TABLE datasets (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    description TEXT NOT NULL DEFAULT '',
    item_count  INTEGER NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE dataset_items (
    dataset_id TEXT NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,
    idx        INTEGER NOT NULL,
    input      TEXT NOT NULL,
    expected   TEXT NOT NULL DEFAULT '',
    metadata   BLOB,
    PRIMARY KEY (dataset_id, idx)
) STRICT, WITHOUT ROWID;

CREATE TABLE experiments (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    dataset_id  TEXT NOT NULL REFERENCES datasets (id),
    agent       TEXT NOT NULL,
    status      TEXT NOT NULL,
    config      BLOB,
    summary     BLOB,
    error       TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    finished_at INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX experiments_dataset ON experiments (dataset_id);

CREATE TABLE experiment_items (
    experiment_id TEXT NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    idx           INTEGER NOT NULL,
    session_id    TEXT NOT NULL DEFAULT '',
    run_id        TEXT NOT NULL DEFAULT '',
    status        TEXT NOT NULL,
    output        TEXT NOT NULL DEFAULT '',
    error         TEXT NOT NULL DEFAULT '',
    scores        BLOB, -- JSON object: eval name → score
    duration      INTEGER NOT NULL DEFAULT 0, -- nanoseconds
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost          REAL NOT NULL DEFAULT 0,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (experiment_id, idx)
) STRICT, WITHOUT ROWID;

-- +goose Down
DROP TABLE experiment_items;
DROP TABLE experiments;
DROP TABLE dataset_items;
DROP TABLE datasets;
DROP TABLE step_events;
DROP TABLE attachments;
DROP TABLE blobs;
DROP TABLE step_annotations;
DROP TABLE evals;
