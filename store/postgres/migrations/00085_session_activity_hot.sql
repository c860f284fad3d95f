-- +goose Up
-- Every step rewrites its session's updated_at (with last_seq and the
-- totals). sessions_activity indexed updated_at itself, so no such update
-- could be HOT: each one inserted a new entry in every index of sessions
-- (the primary key, sessions_activity, sessions_agent) and left the old
-- ones for vacuum. The list order is kept by an index on the second of
-- the activity instead: activity = updated_at / 10^9 changes at most once
-- a second, so all the other updates of a busy session in that second are
-- HOT (fillfactor 80 leaves them room on the page). The order is the same,
-- since activity never decreases as updated_at grows: SessionList orders
-- by activity, updated_at, id (all DESC); the index gives the first key
-- and the sort of the rows of one second is incremental. A generated
-- column is right for every writer (create, append, import, fork) without
-- the driver setting it; adding it rewrites the table once.
ALTER TABLE sessions ADD COLUMN activity BIGINT GENERATED ALWAYS AS (updated_at / 1000000000) STORED;
DROP INDEX sessions_activity;
CREATE INDEX sessions_activity_second ON sessions (activity DESC);
ANALYZE sessions;

-- +goose Down
DROP INDEX sessions_activity_second;
ALTER TABLE sessions DROP COLUMN activity;
CREATE INDEX sessions_activity ON sessions (updated_at DESC, id DESC);
