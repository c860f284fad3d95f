-- +goose Up
-- Time-series analytics (store.MetricsStore).
--
-- step_rollups: the per-minute totals of each run's steps (session_id and
-- run_id kept for the agent filter and the metadata split), maintained by
-- triggers, so an aggregation over whole minutes reads one row per run and
-- minute instead of every step. Usage and cost live in a step's body JSON;
-- the insert trigger extracts its "metrics" object once. The partial
-- minutes at the edges of a range are read from the steps themselves,
-- through steps_created.
CREATE INDEX steps_created ON steps (created_at);
CREATE TABLE step_rollups (
    minute        INTEGER NOT NULL, -- unix nanoseconds of the minute's start
    session_id    TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    run_id        TEXT NOT NULL,
    steps         INTEGER NOT NULL,
    errors        INTEGER NOT NULL,
    input_tokens  INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost          REAL NOT NULL,
    PRIMARY KEY (minute, session_id, run_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX step_rollups_session ON step_rollups (session_id);
-- +goose StatementBegin
CREATE TRIGGER steps_rollup_insert AFTER INSERT ON steps BEGIN
    INSERT INTO step_rollups
    SELECT NEW.created_at - NEW.created_at % 60000000000, NEW.session_id, NEW.run_id, 1,
        NEW.kind = 'error' OR NEW.status = 'failed',
        coalesce(m ->> '$.input_tokens', 0), coalesce(m ->> '$.output_tokens', 0), coalesce(m ->> '$.cost', 0.0)
    FROM (SELECT CAST(NEW.body AS TEXT) -> '$.metrics' AS m) WHERE true
    ON CONFLICT DO UPDATE SET steps = steps + 1, errors = errors + excluded.errors,
        input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens,
        cost = cost + excluded.cost;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER steps_rollup_delete AFTER DELETE ON steps BEGIN
    UPDATE step_rollups SET steps = steps - 1, errors = errors - (OLD.kind = 'error' OR OLD.status = 'failed'),
        input_tokens = input_tokens - coalesce(CAST(OLD.body AS TEXT) -> '$.metrics' ->> '$.input_tokens', 0),
        output_tokens = output_tokens - coalesce(CAST(OLD.body AS TEXT) -> '$.metrics' ->> '$.output_tokens', 0),
        cost = cost - coalesce(CAST(OLD.body AS TEXT) -> '$.metrics' ->> '$.cost', 0.0)
    WHERE minute = OLD.created_at - OLD.created_at % 60000000000 AND session_id = OLD.session_id AND run_id = OLD.run_id;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER steps_rollup_status AFTER UPDATE OF status ON steps
WHEN (OLD.kind = 'error' OR OLD.status = 'failed') <> (NEW.kind = 'error' OR NEW.status = 'failed') BEGIN
    UPDATE step_rollups SET errors = errors - (OLD.kind = 'error' OR OLD.status = 'failed') + (NEW.kind = 'error' OR NEW.status = 'failed')
    WHERE minute = OLD.created_at - OLD.created_at % 60000000000 AND session_id = OLD.session_id AND run_id = OLD.run_id;
END;
-- +goose StatementEnd
-- Steps written before this migration.
INSERT INTO step_rollups
SELECT created_at - created_at % 60000000000, session_id, run_id, count(*), sum(kind = 'error' OR status = 'failed'),
    sum(coalesce(m ->> '$.input_tokens', 0)), sum(coalesce(m ->> '$.output_tokens', 0)), sum(coalesce(m ->> '$.cost', 0.0))
FROM (SELECT created_at, session_id, run_id, kind, status, CAST(body AS TEXT) -> '$.metrics' AS m FROM steps)
GROUP BY 1, 2, 3;

-- Runs by the time they finished; unfinished runs (0) are left out.
CREATE INDEX runs_finished ON runs (finished_at, agent, status, created_at, session_id) WHERE finished_at > 0;
CREATE INDEX evals_created ON evals (created_at);

-- +goose Down
DROP INDEX evals_created;
DROP INDEX runs_finished;
DROP TRIGGER steps_rollup_status;
DROP TRIGGER steps_rollup_delete;
DROP TRIGGER steps_rollup_insert;
DROP TABLE step_rollups;
DROP INDEX steps_created;
