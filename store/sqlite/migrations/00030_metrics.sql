-- +goose Up
-- Time-series analytics (store.MetricsStore). The usage and cost of a step
-- live in its body JSON; virtual generated columns expose them without
-- changing how steps are written, and the covering index steps_metrics holds
-- them with everything an aggregation over a time range reads, so the query
-- scans one index range and never parses a body.
ALTER TABLE steps ADD COLUMN m_input_tokens INTEGER GENERATED ALWAYS AS
    (CAST(coalesce(json_extract(CAST(body AS TEXT), '$.metrics.input_tokens'), 0) AS INTEGER)) VIRTUAL;
ALTER TABLE steps ADD COLUMN m_output_tokens INTEGER GENERATED ALWAYS AS
    (CAST(coalesce(json_extract(CAST(body AS TEXT), '$.metrics.output_tokens'), 0) AS INTEGER)) VIRTUAL;
ALTER TABLE steps ADD COLUMN m_cost REAL GENERATED ALWAYS AS
    (CAST(coalesce(json_extract(CAST(body AS TEXT), '$.metrics.cost'), 0) AS REAL)) VIRTUAL;
CREATE INDEX steps_metrics ON steps (created_at, run_id, session_id, kind, status, m_input_tokens, m_output_tokens, m_cost);

-- step_rollups: the per-minute totals of each run's steps (session_id and
-- run_id kept for the agent filter and the metadata split), maintained by
-- triggers, so an aggregation over whole minutes reads one row per run and
-- minute instead of every step; the partial minutes at the edges of a range
-- are read from steps_metrics.
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
    INSERT INTO step_rollups VALUES (NEW.created_at - NEW.created_at % 60000000000, NEW.session_id, NEW.run_id, 1,
        NEW.kind = 'error' OR NEW.status = 'failed', NEW.m_input_tokens, NEW.m_output_tokens, NEW.m_cost)
    ON CONFLICT DO UPDATE SET steps = steps + 1, errors = errors + excluded.errors,
        input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens,
        cost = cost + excluded.cost;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER steps_rollup_delete AFTER DELETE ON steps BEGIN
    UPDATE step_rollups SET steps = steps - 1, errors = errors - (OLD.kind = 'error' OR OLD.status = 'failed'),
        input_tokens = input_tokens - OLD.m_input_tokens, output_tokens = output_tokens - OLD.m_output_tokens,
        cost = cost - OLD.m_cost
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
INSERT INTO step_rollups
SELECT created_at - created_at % 60000000000, session_id, run_id, count(*), sum(kind = 'error' OR status = 'failed'),
    sum(m_input_tokens), sum(m_output_tokens), sum(m_cost)
FROM steps GROUP BY 1, 2, 3;

-- Runs by the time they finished; unfinished runs (0) are left out.
CREATE INDEX runs_finished ON runs (finished_at, agent, status, created_at, session_id) WHERE finished_at > 0;
CREATE INDEX evals_created ON evals (created_at);

-- +goose Down
DROP TRIGGER steps_rollup_status;
DROP TRIGGER steps_rollup_delete;
DROP TRIGGER steps_rollup_insert;
DROP TABLE step_rollups;
DROP INDEX evals_created;
DROP INDEX runs_finished;
DROP INDEX steps_metrics;
ALTER TABLE steps DROP COLUMN m_cost;
ALTER TABLE steps DROP COLUMN m_output_tokens;
ALTER TABLE steps DROP COLUMN m_input_tokens;
