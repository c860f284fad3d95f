-- +goose Up
-- metric_hours: the totals of complete past hours per agent (store
-- metrics, store/postgres/metrics_hours.go), so a query over days reads a
-- few rows per hour instead of every rollup row and every finished run.
-- Folded lazily by the first query that needs an hour (from step_rollups
-- and runs). The agent '' row of an hour is its total over every agent
-- (a query of all agents reads it alone); it marks the hour folded. (A
-- query cannot filter on the agent '', so a session without agent needs
-- no row of its own.) agent is the agent of a
-- step as the metrics filter attributes it (its run's, else its
-- session's) for the step columns, and the run's own agent for the run
-- columns. durations are the run durations (finished_at − created_at,
-- nanoseconds) of the runs finished in the hour, sorted, packed as
-- little-endian int64, so percentiles over any set of hours are exact.
-- Starts empty: nothing to backfill. Keyed by (agent, hour): a query reads
-- a contiguous range of the totals (and of its agent's rows).
--
-- Invalidation is exact and by hour: a statement that inserts or deletes
-- steps (append, import, copy, fill, prune, truncate, session delete), a
-- change of a step's error status (the answer of a waiting step), a
-- change of a finished run, a run of another agent than its session's
-- inserted or deleted (it changes the agent of its steps and evals) and an
-- eval written or deleted delete the rows of the hours they touch
-- (metric_hours_touch), after taking the advisory lock (730510, hash of
-- the schema) shared until they commit. A fold takes it exclusively: it
-- reads only what every writer before it committed, and a writer after it
-- deletes what it stored. On an append to the current hour this costs a
-- shared lock and one probe of an empty key range per statement.
CREATE TABLE metric_hours (
    hour          BIGINT NOT NULL, -- unix nanoseconds of the hour's start
    agent         TEXT NOT NULL,
    steps         BIGINT NOT NULL,
    errors        BIGINT NOT NULL,
    input_tokens  BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cost          DOUBLE PRECISION NOT NULL,
    runs          BIGINT NOT NULL,
    runs_failed   BIGINT NOT NULL,
    durations     BYTEA NOT NULL,
    eval_sum      DOUBLE PRECISION NOT NULL,
    evals         BIGINT NOT NULL,
    PRIMARY KEY (agent, hour)
);
-- The invalidations delete by hour.
CREATE INDEX metric_hours_hour ON metric_hours (hour);
-- +goose StatementBegin
CREATE FUNCTION metric_hours_touch(hours BIGINT[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(730510, hashtext(current_schema()));
    DELETE FROM metric_hours WHERE hour = ANY (hours);
END
$$;
-- +goose StatementEnd
-- The hours of the steps a statement inserted or deleted (both triggers
-- name their transition table changed_steps).
-- +goose StatementBegin
CREATE FUNCTION metric_hours_steps() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM metric_hours_touch(ARRAY(SELECT DISTINCT created_at - created_at % 3600000000000 FROM changed_steps));
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION metric_hours_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'steps' THEN
        PERFORM metric_hours_touch(ARRAY[OLD.created_at - OLD.created_at % 3600000000000]);
    ELSIF TG_TABLE_NAME = 'evals' THEN
        IF TG_OP = 'INSERT' THEN
            PERFORM metric_hours_touch(ARRAY[NEW.created_at - NEW.created_at % 3600000000000]);
        ELSIF TG_OP = 'DELETE' THEN
            PERFORM metric_hours_touch(ARRAY[OLD.created_at - OLD.created_at % 3600000000000]);
        ELSE
            PERFORM metric_hours_touch(ARRAY[OLD.created_at - OLD.created_at % 3600000000000,
                NEW.created_at - NEW.created_at % 3600000000000]);
        END IF;
    ELSIF TG_OP = 'INSERT' THEN
        PERFORM metric_hours_touch(ARRAY[NEW.finished_at - NEW.finished_at % 3600000000000]);
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM metric_hours_touch(ARRAY[OLD.finished_at - OLD.finished_at % 3600000000000]);
    ELSE
        PERFORM metric_hours_touch(ARRAY[OLD.finished_at - OLD.finished_at % 3600000000000,
            NEW.finished_at - NEW.finished_at % 3600000000000]);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER metric_hours_steps_insert AFTER INSERT ON steps REFERENCING NEW TABLE AS changed_steps
    FOR EACH STATEMENT EXECUTE FUNCTION metric_hours_steps();
CREATE TRIGGER metric_hours_steps_delete AFTER DELETE ON steps REFERENCING OLD TABLE AS changed_steps
    FOR EACH STATEMENT EXECUTE FUNCTION metric_hours_steps();
CREATE TRIGGER metric_hours_steps_status AFTER UPDATE OF status ON steps FOR EACH ROW
    WHEN ((OLD.kind = 'error' OR OLD.status = 'failed') IS DISTINCT FROM (NEW.kind = 'error' OR NEW.status = 'failed'))
    EXECUTE FUNCTION metric_hours_row();
CREATE TRIGGER metric_hours_runs_insert AFTER INSERT ON runs FOR EACH ROW
    WHEN (NEW.finished_at > 0) EXECUTE FUNCTION metric_hours_row();
CREATE TRIGGER metric_hours_runs_update AFTER UPDATE OF finished_at, status, created_at, agent ON runs FOR EACH ROW
    WHEN ((OLD.finished_at > 0 OR NEW.finished_at > 0) AND (OLD.finished_at, OLD.status, OLD.created_at, OLD.agent)
        IS DISTINCT FROM (NEW.finished_at, NEW.status, NEW.created_at, NEW.agent))
    EXECUTE FUNCTION metric_hours_row();
CREATE TRIGGER metric_hours_runs_delete AFTER DELETE ON runs FOR EACH ROW
    WHEN (OLD.finished_at > 0) EXECUTE FUNCTION metric_hours_row();
-- A run inserted or deleted whose agent is not its session's changes the
-- agent of the steps and evals that name it (copy writes runs after their
-- steps): their hours go too.
-- +goose StatementBegin
CREATE FUNCTION metric_hours_run_agent() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r runs;
BEGIN
    IF TG_OP = 'INSERT' THEN r := NEW; ELSE r := OLD; END IF;
    IF r.agent IS DISTINCT FROM COALESCE((SELECT agent FROM sessions WHERE id = r.session_id), '') THEN
        PERFORM metric_hours_touch(ARRAY(
            SELECT minute - minute % 3600000000000 FROM step_rollups WHERE session_id = r.session_id AND run_id = r.id
            UNION SELECT created_at - created_at % 3600000000000 FROM evals WHERE run_id = r.id));
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER metric_hours_runs_agent AFTER INSERT OR DELETE ON runs FOR EACH ROW EXECUTE FUNCTION metric_hours_run_agent();
CREATE TRIGGER metric_hours_evals AFTER INSERT OR DELETE OR UPDATE OF score, created_at, run_id, session_id ON evals
    FOR EACH ROW EXECUTE FUNCTION metric_hours_row();

-- +goose Down
DROP TRIGGER metric_hours_evals ON evals;
DROP TRIGGER metric_hours_runs_agent ON runs;
DROP FUNCTION metric_hours_run_agent();
DROP TRIGGER metric_hours_runs_delete ON runs;
DROP TRIGGER metric_hours_runs_update ON runs;
DROP TRIGGER metric_hours_runs_insert ON runs;
DROP TRIGGER metric_hours_steps_status ON steps;
DROP TRIGGER metric_hours_steps_delete ON steps;
DROP TRIGGER metric_hours_steps_insert ON steps;
DROP FUNCTION metric_hours_row();
DROP FUNCTION metric_hours_steps();
DROP FUNCTION metric_hours_touch(BIGINT[]);
DROP TABLE metric_hours;
