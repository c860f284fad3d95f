-- +goose Up
-- Time-series analytics (store.MetricsStore).
--
-- step_rollups: the per-minute totals of each run's steps, maintained by
-- triggers, so an aggregation over whole minutes reads one row per run and
-- minute instead of every step. Usage and cost live in a step's body JSON;
-- the insert trigger parses each body's "metrics" object once (as json, not
-- jsonb: no tree is built). Steps are immutable, so the driver's writes are
-- unchanged. The partial minutes at the edges of a range are read from the
-- steps themselves, through steps_created. Concurrent appends of different
-- runs touch different rows; the steps of one run are appended one
-- transaction at a time.
CREATE INDEX steps_created ON steps (created_at);
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
) WITH (fillfactor = 50); -- room for HOT updates: a row is updated once per step of its run and minute
CREATE INDEX step_rollups_session ON step_rollups (session_id);

-- Statement-level triggers with transition tables: one grouped upsert per
-- INSERT statement (a batch of steps of one run updates its row once), one
-- grouped update per DELETE; a status change (rare: an answered input
-- step) is handled per row.
-- +goose StatementBegin
CREATE FUNCTION steps_rollup_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO step_rollups AS ro
    SELECT created_at - created_at % 60000000000, session_id, run_id, count(*),
        count(*) FILTER (WHERE kind = 'error' OR status = 'failed'),
        sum(COALESCE((m ->> 'input_tokens')::bigint, 0)), sum(COALESCE((m ->> 'output_tokens')::bigint, 0)),
        sum(COALESCE((m ->> 'cost')::double precision, 0))
    FROM (SELECT created_at, session_id, run_id, kind, status, convert_from(body, 'UTF8')::json -> 'metrics' AS m FROM new_steps) s
    GROUP BY 1, 2, 3
    ON CONFLICT (minute, session_id, run_id) DO UPDATE SET steps = ro.steps + excluded.steps, errors = ro.errors + excluded.errors,
        input_tokens = ro.input_tokens + excluded.input_tokens, output_tokens = ro.output_tokens + excluded.output_tokens,
        cost = ro.cost + excluded.cost;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION steps_rollup_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE step_rollups ro SET steps = ro.steps - d.n, errors = ro.errors - d.e,
        input_tokens = ro.input_tokens - d.it, output_tokens = ro.output_tokens - d.ot, cost = ro.cost - d.c
    FROM (SELECT created_at - created_at % 60000000000 AS minute, session_id, run_id, count(*) AS n,
            count(*) FILTER (WHERE kind = 'error' OR status = 'failed') AS e,
            sum(COALESCE((m ->> 'input_tokens')::bigint, 0)) AS it, sum(COALESCE((m ->> 'output_tokens')::bigint, 0)) AS ot,
            sum(COALESCE((m ->> 'cost')::double precision, 0)) AS c
        FROM (SELECT created_at, session_id, run_id, kind, status, convert_from(body, 'UTF8')::json -> 'metrics' AS m FROM old_steps) o
        GROUP BY 1, 2, 3) d
    WHERE ro.minute = d.minute AND ro.session_id = d.session_id AND ro.run_id = d.run_id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION steps_rollup_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE step_rollups SET errors = errors
        - (OLD.kind = 'error' OR OLD.status = 'failed')::int + (NEW.kind = 'error' OR NEW.status = 'failed')::int
    WHERE minute = OLD.created_at - OLD.created_at % 60000000000 AND session_id = OLD.session_id AND run_id = OLD.run_id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER steps_rollup_insert AFTER INSERT ON steps REFERENCING NEW TABLE AS new_steps
    FOR EACH STATEMENT EXECUTE FUNCTION steps_rollup_insert();
CREATE TRIGGER steps_rollup_delete AFTER DELETE ON steps REFERENCING OLD TABLE AS old_steps
    FOR EACH STATEMENT EXECUTE FUNCTION steps_rollup_delete();
CREATE TRIGGER steps_rollup_status AFTER UPDATE OF status ON steps FOR EACH ROW
    WHEN ((OLD.kind = 'error' OR OLD.status = 'failed') IS DISTINCT FROM (NEW.kind = 'error' OR NEW.status = 'failed'))
    EXECUTE FUNCTION steps_rollup_status();
-- Steps written before this migration.
INSERT INTO step_rollups
SELECT created_at - created_at % 60000000000, session_id, run_id, count(*), count(*) FILTER (WHERE kind = 'error' OR status = 'failed'),
    sum(COALESCE((m ->> 'input_tokens')::bigint, 0)), sum(COALESCE((m ->> 'output_tokens')::bigint, 0)),
    sum(COALESCE((m ->> 'cost')::double precision, 0))
FROM (SELECT created_at, session_id, run_id, kind, status, convert_from(body, 'UTF8')::json -> 'metrics' AS m FROM steps) s
GROUP BY 1, 2, 3;

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
DROP TRIGGER steps_rollup_status ON steps;
DROP TRIGGER steps_rollup_delete ON steps;
DROP TRIGGER steps_rollup_insert ON steps;
DROP FUNCTION steps_rollup_status();
DROP FUNCTION steps_rollup_delete();
DROP FUNCTION steps_rollup_insert();
DROP TABLE step_rollups;
DROP INDEX steps_created;
