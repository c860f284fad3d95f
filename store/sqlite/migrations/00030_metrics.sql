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
-- Runs by the time they finished; unfinished runs (0) are left out.
CREATE INDEX runs_finished ON runs (finished_at, agent, status, created_at, session_id) WHERE finished_at > 0;
CREATE INDEX evals_created ON evals (created_at);

-- +goose Down
DROP INDEX evals_created;
DROP INDEX runs_finished;
DROP INDEX steps_metrics;
ALTER TABLE steps DROP COLUMN m_cost;
ALTER TABLE steps DROP COLUMN m_output_tokens;
ALTER TABLE steps DROP COLUMN m_input_tokens;
