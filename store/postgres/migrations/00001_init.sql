-- +goose Up
-- The schema of the PostgreSQL store; it mirrors store/sqlite's. Every table
-- lives in the store's schema (Config.Schema, on search_path). Times are
-- BIGINT unix nanoseconds, UTC, so a Go time round-trips exactly
-- (timestamptz keeps microseconds); 0 is the zero time. JSON is BYTEA: the
-- exact bytes written come back, unparsed and unreformatted. Ids use the "C"
-- collation, so ORDER BY id is byte order, as in Go and in the other drivers.

-- Sessions: an ordered log of steps; a fork reads its first fork_sequence
-- steps through parent_session_id. last_seq is the highest visible sequence
-- and the source of sequence allocation: an append locks the row, takes
-- last_seq + 1 and writes it back in its transaction.
CREATE TABLE sessions (
    id                TEXT COLLATE "C" PRIMARY KEY,
    agent             TEXT NOT NULL DEFAULT '',
    title             TEXT NOT NULL DEFAULT '',
    parent_session_id TEXT COLLATE "C" REFERENCES sessions (id),
    fork_sequence     BIGINT NOT NULL DEFAULT 0,
    last_seq          BIGINT NOT NULL DEFAULT 0,
    input_tokens      BIGINT NOT NULL DEFAULT 0,
    output_tokens     BIGINT NOT NULL DEFAULT 0,
    cost              DOUBLE PRECISION NOT NULL DEFAULT 0,
    metadata          BYTEA,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL
) WITH (fillfactor = 80);
CREATE INDEX sessions_activity ON sessions (updated_at DESC, id DESC);
CREATE INDEX sessions_agent ON sessions (agent);
CREATE INDEX sessions_parent ON sessions (parent_session_id) WHERE parent_session_id IS NOT NULL;

-- Steps: one row per step; body is the step's versioned wire JSON
-- (steptype.Step.MarshalJSON), byte for byte; the other columns are what
-- reads filter on.
CREATE TABLE steps (
    id         TEXT COLLATE "C" PRIMARY KEY,
    session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    sequence   BIGINT NOT NULL,
    run_id     TEXT COLLATE "C" NOT NULL DEFAULT '',
    kind       TEXT NOT NULL,
    status     TEXT NOT NULL,
    hop        INTEGER NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    body       BYTEA NOT NULL,
    UNIQUE (session_id, sequence)
);
CREATE INDEX steps_run ON steps (run_id, sequence) WHERE run_id <> '';
CREATE INDEX steps_waiting ON steps (run_id) WHERE status = 'waiting';

-- Runs: one invocation of an agent in a session, with its cursor, state
-- snapshot and lease. Cursor and state change on every step and are not
-- indexed, so those updates stay HOT (fillfactor leaves them room).
CREATE TABLE runs (
    id             TEXT COLLATE "C" PRIMARY KEY,
    session_id     TEXT COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    agent          TEXT NOT NULL,
    parent_run_id  TEXT COLLATE "C" NOT NULL DEFAULT '',
    parent_step_id TEXT COLLATE "C" NOT NULL DEFAULT '',
    hop            INTEGER NOT NULL DEFAULT 0,
    status         TEXT NOT NULL,
    cursor         TEXT NOT NULL DEFAULT '',
    state          BYTEA,
    input          TEXT NOT NULL DEFAULT '',
    output         TEXT NOT NULL DEFAULT '',
    error          BYTEA, -- steptype.StepError as JSON
    step_count     BIGINT NOT NULL DEFAULT 0,
    options        BYTEA,
    lease_owner    TEXT NOT NULL DEFAULT '',
    lease_expires  BIGINT NOT NULL DEFAULT 0,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL,
    finished_at    BIGINT NOT NULL DEFAULT 0
) WITH (fillfactor = 80);
CREATE INDEX runs_session ON runs (session_id, created_at DESC, id DESC);
CREATE INDEX runs_parent ON runs (parent_run_id) WHERE parent_run_id <> '';
CREATE INDEX runs_created ON runs (created_at DESC, id DESC);
-- RunClaim scans this, oldest first, with FOR UPDATE SKIP LOCKED.
CREATE INDEX runs_claimable ON runs (created_at, id) WHERE status IN ('queued', 'running');

-- +goose Down
DROP TABLE runs;
DROP TABLE steps;
DROP TABLE sessions;
