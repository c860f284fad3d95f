-- +goose Up
-- tasks: the steps and tool calls served by worker processes
-- (docs/workers.md, store.TaskStore). key is the idempotency key (run,
-- step, call); token is the fencing token, incremented by every claim; a
-- finish or renew names the token it holds and changes the row only while
-- it is the current one. Times are unix nanoseconds (0: none).
CREATE TABLE tasks (
    id            TEXT COLLATE "C" PRIMARY KEY,
    key           TEXT COLLATE "C" NOT NULL UNIQUE,
    kind          TEXT NOT NULL,
    name          TEXT NOT NULL,
    agent         TEXT NOT NULL,
    agent_version TEXT NOT NULL DEFAULT '',
    session_id    TEXT NOT NULL,
    run_id        TEXT COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step_id       TEXT NOT NULL DEFAULT '',
    attempt       INTEGER NOT NULL DEFAULT 0,
    input         BYTEA,
    state         TEXT NOT NULL CHECK (state IN ('queued', 'claimed', 'completed', 'failed', 'parked')),
    owner         TEXT NOT NULL DEFAULT '',
    token         BIGINT NOT NULL DEFAULT 0,
    claims        INTEGER NOT NULL DEFAULT 0,
    lease_expires BIGINT NOT NULL DEFAULT 0,
    result        BYTEA,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    finished_at   BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX tasks_claimable ON tasks (agent, created_at, id) WHERE state IN ('queued', 'claimed');
CREATE INDEX tasks_run ON tasks (run_id, created_at, id);

-- +goose Down
DROP TABLE tasks;
