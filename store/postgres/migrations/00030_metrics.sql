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

-- step_rollups: the per-minute totals of each run's steps, maintained by
-- triggers, so an aggregation over whole minutes reads one row per run and
-- minute instead of every step; the partial minutes at the edges of a range
-- are read from steps_metrics. Concurrent appends of different runs touch
-- different rows; the steps of one run are appended one transaction at a time.
CREATE TABLE step_rollups (
    minute        BIGINT NOT NULL, -- unix nanoseconds of the minute's start
    session_id    TEXT COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    run_id        TEXT COLLATE "C" NOT NULL,
    steps         BIGINT NOT NULL,
    errors        BIGINT NOT NULL,
    input_tokens  BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cost          DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (minute, session_id, run_id)
);
CREATE INDEX step_rollups_session ON step_rollups (session_id);

-- +goose StatementBegin
CREATE FUNCTION steps_rollup() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    d BIGINT := 1;
    r steps;
BEGIN
    IF TG_OP = 'DELETE' THEN
        d := -1;
        r := OLD;
    ELSE
        r := NEW;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        UPDATE step_rollups SET errors = errors
            - (OLD.kind = 'error' OR OLD.status = 'failed')::int + (NEW.kind = 'error' OR NEW.status = 'failed')::int
        WHERE minute = OLD.created_at - OLD.created_at % 60000000000 AND session_id = OLD.session_id AND run_id = OLD.run_id;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE step_rollups SET steps = steps - 1, errors = errors - (r.kind = 'error' OR r.status = 'failed')::int,
            input_tokens = input_tokens - r.m_input_tokens, output_tokens = output_tokens - r.m_output_tokens,
            cost = cost - r.m_cost
        WHERE minute = r.created_at - r.created_at % 60000000000 AND session_id = r.session_id AND run_id = r.run_id;
    ELSE
        INSERT INTO step_rollups AS ro VALUES (r.created_at - r.created_at % 60000000000, r.session_id, r.run_id, 1,
            (r.kind = 'error' OR r.status = 'failed')::int, r.m_input_tokens, r.m_output_tokens, r.m_cost)
        ON CONFLICT (minute, session_id, run_id) DO UPDATE SET steps = ro.steps + 1, errors = ro.errors + excluded.errors,
            input_tokens = ro.input_tokens + excluded.input_tokens, output_tokens = ro.output_tokens + excluded.output_tokens,
            cost = ro.cost + excluded.cost;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER steps_rollup_insert AFTER INSERT ON steps FOR EACH ROW EXECUTE FUNCTION steps_rollup();
CREATE TRIGGER steps_rollup_delete AFTER DELETE ON steps FOR EACH ROW EXECUTE FUNCTION steps_rollup();
CREATE TRIGGER steps_rollup_status AFTER UPDATE OF status ON steps FOR EACH ROW
    WHEN ((OLD.kind = 'error' OR OLD.status = 'failed') IS DISTINCT FROM (NEW.kind = 'error' OR NEW.status = 'failed'))
    EXECUTE FUNCTION steps_rollup();
INSERT INTO step_rollups
SELECT created_at - created_at % 60000000000, session_id, run_id, count(*), count(*) FILTER (WHERE kind = 'error' OR status = 'failed'),
    sum(m_input_tokens), sum(m_output_tokens), sum(m_cost)
FROM steps GROUP BY 1, 2, 3;

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
DROP TRIGGER steps_rollup_status ON steps;
DROP TRIGGER steps_rollup_delete ON steps;
DROP TRIGGER steps_rollup_insert ON steps;
DROP FUNCTION steps_rollup();
DROP TABLE step_rollups;
DROP INDEX IF EXISTS evals_created;
DROP INDEX runs_finished;
DROP INDEX steps_metrics;
DROP TRIGGER steps_metrics_fill ON steps;
DROP FUNCTION steps_metrics_fill();
ALTER TABLE steps DROP COLUMN m_cost, DROP COLUMN m_output_tokens, DROP COLUMN m_input_tokens;
