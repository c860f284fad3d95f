-- +goose Up
-- metric_hours: the totals of complete past hours per agent (store
-- metrics, store/sqlite/metrics.go), so a query over days reads a few rows
-- per hour instead of every rollup row and every finished run. Folded
-- lazily by the first query that needs an hour (from step_rollups and
-- runs, in a write transaction). The agent '' row of an hour is its
-- total over every agent (a query of all agents reads it alone); it marks
-- the hour folded. (A query cannot filter on the agent '', so a session
-- without agent needs no row of its own.)
-- agent is the agent of a step or an eval as the metrics filter
-- attributes it (its run's, else its session's) for the step and eval
-- columns, and the run's own agent for the run columns. durations are the run durations (finished_at
-- − created_at, nanoseconds) of the runs finished in the hour, sorted,
-- packed as little-endian int64, so percentiles over any set of hours are
-- exact. Starts empty: nothing to backfill.
--
-- Invalidation is exact and by hour: anything that changes a rollup row
-- (a step inserted, deleted, or its error status changed — import, copy,
-- fill, prune, truncate, session delete, the answer of a waiting step)
-- or a finished run (inserted, deleted, its finish, status or start
-- changed; a run of another agent than its session's inserted or deleted,
-- which changes the agent of its steps and evals) or an eval (written,
-- deleted) deletes the rows of the hours it touches. On an append in the
-- current hour that is one probe of an empty key range.
CREATE TABLE metric_hours (
    hour          INTEGER NOT NULL, -- unix nanoseconds of the hour's start
    agent         TEXT NOT NULL,
    steps         INTEGER NOT NULL,
    errors        INTEGER NOT NULL,
    input_tokens  INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost          REAL NOT NULL,
    runs          INTEGER NOT NULL,
    runs_failed   INTEGER NOT NULL,
    durations     BLOB NOT NULL,
    eval_sum      REAL NOT NULL,
    evals         INTEGER NOT NULL,
    PRIMARY KEY (agent, hour)
) STRICT, WITHOUT ROWID;
-- The invalidations delete by hour.
CREATE INDEX metric_hours_hour ON metric_hours (hour);
-- +goose StatementBegin
CREATE TRIGGER metric_hours_rollup_insert AFTER INSERT ON step_rollups BEGIN
    DELETE FROM metric_hours WHERE hour = NEW.minute - NEW.minute % 3600000000000;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER metric_hours_rollup_update AFTER UPDATE ON step_rollups BEGIN
    DELETE FROM metric_hours WHERE hour = NEW.minute - NEW.minute % 3600000000000;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER metric_hours_rollup_delete AFTER DELETE ON step_rollups BEGIN
    DELETE FROM metric_hours WHERE hour = OLD.minute - OLD.minute % 3600000000000;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER metric_hours_run_insert AFTER INSERT ON runs WHEN NEW.finished_at > 0 BEGIN
    DELETE FROM metric_hours WHERE hour = NEW.finished_at - NEW.finished_at % 3600000000000;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER metric_hours_run_update AFTER UPDATE OF finished_at, status, created_at, agent ON runs
WHEN (OLD.finished_at > 0 OR NEW.finished_at > 0) AND (OLD.finished_at <> NEW.finished_at OR OLD.status <> NEW.status
    OR OLD.created_at <> NEW.created_at OR OLD.agent <> NEW.agent) BEGIN
    DELETE FROM metric_hours WHERE hour IN (OLD.finished_at - OLD.finished_at % 3600000000000,
        NEW.finished_at - NEW.finished_at % 3600000000000);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER metric_hours_run_delete AFTER DELETE ON runs WHEN OLD.finished_at > 0 BEGIN
    DELETE FROM metric_hours WHERE hour = OLD.finished_at - OLD.finished_at % 3600000000000;
END;
-- +goose StatementEnd
-- A run inserted or deleted whose agent is not its session's changes the
-- agent of the steps and evals that name it (copy writes runs after their
-- steps): their hours go too.
-- +goose StatementBegin
CREATE TRIGGER metric_hours_run_agent_insert AFTER INSERT ON runs
WHEN NEW.agent <> coalesce((SELECT agent FROM sessions WHERE id = NEW.session_id), '') BEGIN
    DELETE FROM metric_hours WHERE hour IN (
        SELECT minute - minute % 3600000000000 FROM step_rollups WHERE session_id = NEW.session_id AND run_id = NEW.id
        UNION SELECT created_at - created_at % 3600000000000 FROM evals WHERE run_id = NEW.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER metric_hours_run_agent_delete AFTER DELETE ON runs
WHEN OLD.agent <> coalesce((SELECT agent FROM sessions WHERE id = OLD.session_id), '') BEGIN
    DELETE FROM metric_hours WHERE hour IN (
        SELECT minute - minute % 3600000000000 FROM step_rollups WHERE session_id = OLD.session_id AND run_id = OLD.id
        UNION SELECT created_at - created_at % 3600000000000 FROM evals WHERE run_id = OLD.id);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER metric_hours_eval_insert AFTER INSERT ON evals BEGIN
    DELETE FROM metric_hours WHERE hour = NEW.created_at - NEW.created_at % 3600000000000;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER metric_hours_eval_update AFTER UPDATE OF score, created_at, run_id, session_id ON evals BEGIN
    DELETE FROM metric_hours WHERE hour IN (OLD.created_at - OLD.created_at % 3600000000000,
        NEW.created_at - NEW.created_at % 3600000000000);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER metric_hours_eval_delete AFTER DELETE ON evals BEGIN
    DELETE FROM metric_hours WHERE hour = OLD.created_at - OLD.created_at % 3600000000000;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER metric_hours_eval_delete;
DROP TRIGGER metric_hours_eval_update;
DROP TRIGGER metric_hours_eval_insert;
DROP TRIGGER metric_hours_run_agent_delete;
DROP TRIGGER metric_hours_run_agent_insert;
DROP TRIGGER metric_hours_run_delete;
DROP TRIGGER metric_hours_run_update;
DROP TRIGGER metric_hours_run_insert;
DROP TRIGGER metric_hours_rollup_delete;
DROP TRIGGER metric_hours_rollup_update;
DROP TRIGGER metric_hours_rollup_insert;
DROP TABLE metric_hours;
