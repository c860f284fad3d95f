-- +goose Up
-- Time-series analytics (store.MetricsStore). The usage and cost of a step
-- live in its body JSON; a BEFORE INSERT trigger copies them into columns
-- once, when the step is written (steps are immutable, and the body of an
-- answered input step keeps its metrics), so the driver's writes are
-- unchanged and an aggregation never parses a body. steps_metrics covers
-- every column the aggregation reads, for index-only scans of a time range.
ALTER TABLE steps
    ADD COLUMN m_input_tokens  BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN m_output_tokens BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN m_cost          DOUBLE PRECISION NOT NULL DEFAULT 0;

-- +goose StatementBegin
CREATE FUNCTION steps_metrics_fill() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    m json;
BEGIN
    m := convert_from(NEW.body, 'UTF8')::json -> 'metrics';
    IF m IS NOT NULL THEN
        NEW.m_input_tokens := COALESCE((m ->> 'input_tokens')::bigint, 0);
        NEW.m_output_tokens := COALESCE((m ->> 'output_tokens')::bigint, 0);
        NEW.m_cost := COALESCE((m ->> 'cost')::double precision, 0);
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER steps_metrics_fill BEFORE INSERT ON steps FOR EACH ROW EXECUTE FUNCTION steps_metrics_fill();

-- Steps written before this migration.
UPDATE steps SET
    m_input_tokens = COALESCE((convert_from(body, 'UTF8')::json -> 'metrics' ->> 'input_tokens')::bigint, 0),
    m_output_tokens = COALESCE((convert_from(body, 'UTF8')::json -> 'metrics' ->> 'output_tokens')::bigint, 0),
    m_cost = COALESCE((convert_from(body, 'UTF8')::json -> 'metrics' ->> 'cost')::double precision, 0)
WHERE convert_from(body, 'UTF8')::json -> 'metrics' IS NOT NULL;

CREATE INDEX steps_metrics ON steps (created_at)
    INCLUDE (run_id, session_id, kind, status, m_input_tokens, m_output_tokens, m_cost);
-- Runs by the time they finished; unfinished runs (0) are left out.
CREATE INDEX runs_finished ON runs (finished_at) INCLUDE (agent, status, created_at, session_id) WHERE finished_at > 0;
-- Evals by creation time, when the observation tables exist.
-- +goose StatementBegin
DO $$
BEGIN
    IF to_regclass('evals') IS NOT NULL THEN
        CREATE INDEX IF NOT EXISTS evals_created ON evals (created_at);
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP INDEX IF EXISTS evals_created;
DROP INDEX runs_finished;
DROP INDEX steps_metrics;
DROP TRIGGER steps_metrics_fill ON steps;
DROP FUNCTION steps_metrics_fill();
ALTER TABLE steps DROP COLUMN m_cost, DROP COLUMN m_output_tokens, DROP COLUMN m_input_tokens;
