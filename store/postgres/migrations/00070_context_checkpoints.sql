-- +goose Up
-- Context checkpoints: the engine's saved state of a session's model
-- context after one step (store.ContextCheckpoint), so starting a run on a
-- long session does not rebuild the context from step 1. Derived data: a
-- checkpoint lives and dies with its step (the foreign key), so a
-- truncation, a session delete or a prune removes it, and a copy need not
-- carry it. Nothing references steps on the append path: steps pay nothing.
CREATE TABLE context_checkpoints (
    session_id TEXT COLLATE "C" NOT NULL,
    sequence   BIGINT NOT NULL,
    step_id    TEXT COLLATE "C" NOT NULL REFERENCES steps (id) ON DELETE CASCADE,
    messages   BIGINT NOT NULL,
    tokens     BIGINT NOT NULL,
    state      BYTEA NOT NULL,
    PRIMARY KEY (session_id, sequence)
);
CREATE INDEX context_checkpoints_step ON context_checkpoints (step_id);

-- +goose Down
DROP TABLE context_checkpoints;
