-- +goose Up
-- Every write earns its place (issue 34). A step used to write four pages
-- beyond its own rows: the rollup and statistics rows of the insert
-- triggers (step_rollups, session_step_stats), the steps_created entry
-- and the moved sessions_activity entry. Now:
--
-- * step_rollups and session_step_stats hold the steps up to the rowid in
--   step_fold ("folded"); the steps after it are the tail, which the writer
--   folds into both tables in one statement each, in the transaction of a
--   write, once the tail holds foldEvery steps, and when the store closes
--   (store/sqlite/fold.go). The reads add the tail's aggregate over the
--   rowid range to the folded rows in one read transaction, so they are
--   exact at every moment; a crash before a fold loses nothing, the tail is
--   the steps themselves. New rows get rowids above every rowid in the
--   table, so above the mark: a delete that takes the highest rows lowers
--   the mark to the highest rowid left, so it can never reach over an
--   unfolded row.
-- * The delete and status triggers stay (rare writes), for folded rows
--   only: the tail reads the steps as they are.
-- * sessions_activity (updated_at, id), which every step's session UPDATE
--   moved, is replaced by sessions_activity_second on the second of the
--   activity, a column the driver sets only when the second changes (the
--   UPDATE of the other steps of that second does not name it, so the
--   index is not touched). SessionList orders by activity, updated_at, id
--   (all DESC): the same order, as activity never decreases as updated_at
--   grows; the index gives the first key and the rows of one second are
--   sorted on the fly.
-- * steps_created (created_at), whose newest leaf every step wrote, is
--   replaced by step_times (created_at, step rowid), which the fold fills
--   with the tail's rows: the metrics read the folded steps of the partial
--   minutes at the edges of a range through it, and the tail by rowid.
--
-- The indexes of steps and what reads each: steps_run (run_id, sequence):
-- a run's steps (StepList by run, replay); steps_waiting: the waiting
-- steps of a run (resolve, the engine's invariants); steps_expiry: the
-- expiring input requests; the UNIQUE (session_id, sequence): a
-- session's steps in order, the append's sequence check; the primary key
-- (id): a step by id, the idempotent append.
CREATE TABLE step_fold (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    upto INTEGER NOT NULL -- the highest folded rowid of steps
) STRICT;
-- The triggers kept both tables up to date so far: everything is folded.
INSERT INTO step_fold VALUES (1, (SELECT coalesce(max(rowid), 0) FROM steps));
CREATE TABLE step_times (
    created_at INTEGER NOT NULL,
    step       INTEGER NOT NULL, -- the rowid of the step in steps
    PRIMARY KEY (created_at, step)
) STRICT, WITHOUT ROWID;
INSERT INTO step_times SELECT created_at, rowid FROM steps;
DROP INDEX steps_created;
DROP TRIGGER steps_rollup_insert;
DROP TRIGGER steps_stats_insert;
DROP TRIGGER steps_rollup_delete;
DROP TRIGGER steps_stats_delete;
DROP TRIGGER steps_rollup_status;
-- One trigger, so that the tables see the mark before it is lowered.
-- +goose StatementBegin
CREATE TRIGGER steps_fold_delete AFTER DELETE ON steps BEGIN
    DELETE FROM step_times WHERE created_at = OLD.created_at AND step = OLD.rowid;
    UPDATE step_rollups SET steps = steps - 1, errors = errors - (OLD.kind = 'error' OR OLD.status = 'failed'),
        input_tokens = input_tokens - OLD.input_tokens, output_tokens = output_tokens - OLD.output_tokens, cost = cost - OLD.cost
    WHERE minute = OLD.created_at - OLD.created_at % 60000000000 AND session_id = OLD.session_id AND run_id = OLD.run_id
        AND OLD.rowid <= (SELECT upto FROM step_fold);
    UPDATE session_step_stats SET steps = steps - 1, input_tokens = input_tokens - OLD.input_tokens,
        output_tokens = output_tokens - OLD.output_tokens, cached_tokens = cached_tokens - OLD.cached_tokens,
        cost = cost - OLD.cost
    WHERE session_id = OLD.session_id AND kind = OLD.kind AND role = OLD.role
        AND OLD.rowid <= (SELECT upto FROM step_fold);
    UPDATE step_fold SET upto = (SELECT coalesce(max(rowid), 0) FROM steps)
    WHERE upto > (SELECT coalesce(max(rowid), 0) FROM steps);
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER steps_fold_status AFTER UPDATE OF status ON steps
WHEN (OLD.kind = 'error' OR OLD.status = 'failed') <> (NEW.kind = 'error' OR NEW.status = 'failed')
    AND OLD.rowid <= (SELECT upto FROM step_fold) BEGIN
    UPDATE step_rollups SET errors = errors - (OLD.kind = 'error' OR OLD.status = 'failed') + (NEW.kind = 'error' OR NEW.status = 'failed')
    WHERE minute = OLD.created_at - OLD.created_at % 60000000000 AND session_id = OLD.session_id AND run_id = OLD.run_id;
END;
-- +goose StatementEnd

ALTER TABLE sessions ADD COLUMN activity INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET activity = updated_at / 1000000000;
DROP INDEX sessions_activity;
CREATE INDEX sessions_activity_second ON sessions (activity DESC);

-- +goose Down
DROP INDEX sessions_activity_second;
ALTER TABLE sessions DROP COLUMN activity;
CREATE INDEX sessions_activity ON sessions (updated_at DESC, id DESC);
-- Fold the tail before the insert triggers come back.
INSERT INTO step_rollups
SELECT created_at - created_at % 60000000000, session_id, run_id, count(*), sum(kind = 'error' OR status = 'failed'),
    sum(input_tokens), sum(output_tokens), sum(cost)
FROM steps WHERE rowid > (SELECT upto FROM step_fold) GROUP BY 1, 2, 3
ON CONFLICT DO UPDATE SET steps = steps + excluded.steps, errors = errors + excluded.errors,
    input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens,
    cost = cost + excluded.cost;
INSERT INTO session_step_stats
SELECT session_id, kind, role, count(*), sum(input_tokens), sum(output_tokens), sum(cached_tokens), sum(cost)
FROM steps WHERE rowid > (SELECT upto FROM step_fold) GROUP BY 1, 2, 3
ON CONFLICT DO UPDATE SET steps = steps + excluded.steps, input_tokens = input_tokens + excluded.input_tokens,
    output_tokens = output_tokens + excluded.output_tokens, cached_tokens = cached_tokens + excluded.cached_tokens,
    cost = cost + excluded.cost;
DROP TRIGGER steps_fold_status;
DROP TRIGGER steps_fold_delete;
DROP TABLE step_fold;
DROP TABLE step_times;
CREATE INDEX steps_created ON steps (created_at);
-- +goose StatementBegin
CREATE TRIGGER steps_rollup_insert AFTER INSERT ON steps BEGIN
    INSERT INTO step_rollups VALUES (NEW.created_at - NEW.created_at % 60000000000, NEW.session_id, NEW.run_id, 1,
        NEW.kind = 'error' OR NEW.status = 'failed', NEW.input_tokens, NEW.output_tokens, NEW.cost)
    ON CONFLICT DO UPDATE SET steps = steps + 1, errors = errors + excluded.errors,
        input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens,
        cost = cost + excluded.cost;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER steps_rollup_delete AFTER DELETE ON steps BEGIN
    UPDATE step_rollups SET steps = steps - 1, errors = errors - (OLD.kind = 'error' OR OLD.status = 'failed'),
        input_tokens = input_tokens - OLD.input_tokens, output_tokens = output_tokens - OLD.output_tokens, cost = cost - OLD.cost
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
-- +goose StatementBegin
CREATE TRIGGER steps_stats_insert AFTER INSERT ON steps BEGIN
    INSERT INTO session_step_stats VALUES (NEW.session_id, NEW.kind, NEW.role, 1,
        NEW.input_tokens, NEW.output_tokens, NEW.cached_tokens, NEW.cost)
    ON CONFLICT DO UPDATE SET steps = steps + 1, input_tokens = input_tokens + excluded.input_tokens,
        output_tokens = output_tokens + excluded.output_tokens, cached_tokens = cached_tokens + excluded.cached_tokens,
        cost = cost + excluded.cost;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER steps_stats_delete AFTER DELETE ON steps BEGIN
    UPDATE session_step_stats SET steps = steps - 1, input_tokens = input_tokens - OLD.input_tokens,
        output_tokens = output_tokens - OLD.output_tokens, cached_tokens = cached_tokens - OLD.cached_tokens,
        cost = cost - OLD.cost
    WHERE session_id = OLD.session_id AND kind = OLD.kind AND role = OLD.role;
END;
-- +goose StatementEnd
