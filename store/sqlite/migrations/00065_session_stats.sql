-- +goose Up
-- Per-session totals (store.SessionStatsReader, a session's summary):
-- steps by kind and role with their usage and cost, runs by status,
-- maintained by triggers as rows are written, so summarizing a session of
-- a million steps reads a few rows. The insert trigger parses the body
-- once (role and metrics).
CREATE TABLE session_step_stats (
    session_id    TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    kind          TEXT NOT NULL,
    role          TEXT NOT NULL,
    steps         INTEGER NOT NULL,
    input_tokens  INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL,
    cost          REAL NOT NULL,
    PRIMARY KEY (session_id, kind, role)
) STRICT, WITHOUT ROWID;
CREATE TABLE session_run_stats (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    status     TEXT NOT NULL,
    runs       INTEGER NOT NULL,
    PRIMARY KEY (session_id, status)
) STRICT, WITHOUT ROWID;
-- +goose StatementBegin
CREATE TRIGGER steps_stats_insert AFTER INSERT ON steps BEGIN
    INSERT INTO session_step_stats
    SELECT NEW.session_id, NEW.kind, coalesce(j ->> '$.role', ''), 1,
        coalesce(j ->> '$.metrics.input_tokens', 0), coalesce(j ->> '$.metrics.output_tokens', 0),
        coalesce(j ->> '$.metrics.cached_tokens', 0), coalesce(j ->> '$.metrics.cost', 0.0)
    FROM (SELECT CAST(NEW.body AS TEXT) AS j) WHERE true
    ON CONFLICT DO UPDATE SET steps = steps + 1, input_tokens = input_tokens + excluded.input_tokens,
        output_tokens = output_tokens + excluded.output_tokens, cached_tokens = cached_tokens + excluded.cached_tokens,
        cost = cost + excluded.cost;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER steps_stats_delete AFTER DELETE ON steps BEGIN
    UPDATE session_step_stats SET steps = steps - 1,
        input_tokens = input_tokens - coalesce(j ->> '$.metrics.input_tokens', 0),
        output_tokens = output_tokens - coalesce(j ->> '$.metrics.output_tokens', 0),
        cached_tokens = cached_tokens - coalesce(j ->> '$.metrics.cached_tokens', 0),
        cost = cost - coalesce(j ->> '$.metrics.cost', 0.0)
    FROM (SELECT CAST(OLD.body AS TEXT) AS j)
    WHERE session_id = OLD.session_id AND kind = OLD.kind AND role = coalesce(j ->> '$.role', '');
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER runs_stats_insert AFTER INSERT ON runs BEGIN
    INSERT INTO session_run_stats VALUES (NEW.session_id, NEW.status, 1)
    ON CONFLICT DO UPDATE SET runs = runs + 1;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER runs_stats_status AFTER UPDATE OF status ON runs WHEN OLD.status <> NEW.status BEGIN
    UPDATE session_run_stats SET runs = runs - 1 WHERE session_id = OLD.session_id AND status = OLD.status;
    INSERT INTO session_run_stats VALUES (NEW.session_id, NEW.status, 1)
    ON CONFLICT DO UPDATE SET runs = runs + 1;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER runs_stats_delete AFTER DELETE ON runs BEGIN
    UPDATE session_run_stats SET runs = runs - 1 WHERE session_id = OLD.session_id AND status = OLD.status;
END;
-- +goose StatementEnd
-- The waiting runs, newest first: the engine's sweep for parents left
-- waiting lists them every 30 s (without it, a scan of every run).
CREATE INDEX runs_waiting ON runs (created_at DESC, id DESC) WHERE status = 'waiting';
-- Rows written before this migration.
INSERT INTO session_step_stats
SELECT session_id, kind, coalesce(j ->> '$.role', ''), count(*),
    sum(coalesce(j ->> '$.metrics.input_tokens', 0)), sum(coalesce(j ->> '$.metrics.output_tokens', 0)),
    sum(coalesce(j ->> '$.metrics.cached_tokens', 0)), sum(coalesce(j ->> '$.metrics.cost', 0.0))
FROM (SELECT session_id, kind, CAST(body AS TEXT) AS j FROM steps)
GROUP BY 1, 2, 3;
INSERT INTO session_run_stats SELECT session_id, status, count(*) FROM runs GROUP BY 1, 2;

-- +goose Down
DROP INDEX runs_waiting;
DROP TRIGGER runs_stats_delete;
DROP TRIGGER runs_stats_status;
DROP TRIGGER runs_stats_insert;
DROP TRIGGER steps_stats_delete;
DROP TRIGGER steps_stats_insert;
DROP TABLE session_run_stats;
DROP TABLE session_step_stats;
