-- +goose Up
-- Sessions: an ordered log of steps; a fork reads its first fork_sequence
-- steps through parent_session_id. last_seq is the highest visible sequence
-- and the source of sequence allocation (updated in the appending tx).
CREATE TABLE sessions (
    id                TEXT PRIMARY KEY,
    agent             TEXT NOT NULL DEFAULT '',
    title             TEXT NOT NULL DEFAULT '',
    parent_session_id TEXT REFERENCES sessions (id),
    fork_sequence     INTEGER NOT NULL DEFAULT 0,
    last_seq          INTEGER NOT NULL DEFAULT 0,
    input_tokens      INTEGER NOT NULL DEFAULT 0,
    output_tokens     INTEGER NOT NULL DEFAULT 0,
    cost              REAL NOT NULL DEFAULT 0,
    metadata          BLOB,
    created_at        INTEGER NOT NULL, -- unix nanoseconds, UTC
    updated_at        INTEGER NOT NULL
) STRICT;
CREATE INDEX sessions_activity ON sessions (updated_at DESC, id DESC);
-- Not (agent, updated_at): every append moves updated_at, and each index
-- holding it costs a page write per commit.
CREATE INDEX sessions_agent ON sessions (agent);
CREATE INDEX sessions_parent ON sessions (parent_session_id) WHERE parent_session_id IS NOT NULL;

-- Steps: one row per step; body is the step's versioned wire JSON
-- (steptype.Step.MarshalJSON), the other columns are what reads filter on.
CREATE TABLE steps (
    id         TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    sequence   INTEGER NOT NULL,
    run_id     TEXT NOT NULL DEFAULT '',
    kind       TEXT NOT NULL,
    status     TEXT NOT NULL,
    hop        INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    body       BLOB NOT NULL,
    UNIQUE (session_id, sequence)
) STRICT;
CREATE INDEX steps_run ON steps (run_id, sequence) WHERE run_id <> '';
CREATE INDEX steps_waiting ON steps (run_id) WHERE status = 'waiting';

-- Runs: one invocation of an agent in a session, with its cursor, state
-- snapshot and lease.
CREATE TABLE runs (
    id             TEXT PRIMARY KEY,
    session_id     TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    agent          TEXT NOT NULL,
    parent_run_id  TEXT NOT NULL DEFAULT '',
    parent_step_id TEXT NOT NULL DEFAULT '',
    hop            INTEGER NOT NULL DEFAULT 0,
    status         TEXT NOT NULL,
    cursor         TEXT NOT NULL DEFAULT '',
    state          BLOB,
    input          TEXT NOT NULL DEFAULT '',
    output         TEXT NOT NULL DEFAULT '',
    error          BLOB, -- steptype.StepError as JSON
    step_count     INTEGER NOT NULL DEFAULT 0,
    options        BLOB,
    lease_owner    TEXT NOT NULL DEFAULT '',
    lease_expires  INTEGER NOT NULL DEFAULT 0,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    finished_at    INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX runs_session ON runs (session_id, created_at DESC, id DESC);
CREATE INDEX runs_parent ON runs (parent_run_id) WHERE parent_run_id <> '';
CREATE INDEX runs_created ON runs (created_at DESC, id DESC);
CREATE INDEX runs_claimable ON runs (created_at, id) WHERE status IN ('queued', 'running');

-- +goose Down
DROP TABLE runs;
DROP TABLE steps;
DROP TABLE sessions;
