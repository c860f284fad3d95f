-- +goose Up
-- A step's role and usage as columns, written by the driver from the step
-- it encodes (store/sqlite/step_write.go and every other INSERT INTO
-- steps), so the triggers that keep step_rollups (00030) and
-- session_step_stats (00065) read NEW./OLD. columns instead of parsing the
-- body twice per inserted or deleted step. The body stays the record; the
-- columns are what it says, set once (steps are immutable but for the
-- status and outputs of a resolved request). A zero (the default, most
-- steps but the model's) costs one header byte per column and no payload:
-- SQLite stores the integer 0 and an integral REAL 0.0 as a type code.
ALTER TABLE steps ADD COLUMN role TEXT NOT NULL DEFAULT '';
ALTER TABLE steps ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN cost REAL NOT NULL DEFAULT 0;
-- Steps written before this migration (the status trigger is not fired:
-- status is not set).
UPDATE steps SET role = coalesce(CAST(body AS TEXT) ->> '$.role', ''),
    input_tokens = coalesce(CAST(body AS TEXT) ->> '$.metrics.input_tokens', 0),
    output_tokens = coalesce(CAST(body AS TEXT) ->> '$.metrics.output_tokens', 0),
    cached_tokens = coalesce(CAST(body AS TEXT) ->> '$.metrics.cached_tokens', 0),
    cost = coalesce(CAST(body AS TEXT) ->> '$.metrics.cost', 0.0)
WHERE CAST(body AS TEXT) ->> '$.role' IS NOT NULL OR CAST(body AS TEXT) -> '$.metrics' IS NOT NULL;
DROP TRIGGER steps_rollup_insert;
DROP TRIGGER steps_rollup_delete;
DROP TRIGGER steps_stats_insert;
DROP TRIGGER steps_stats_delete;
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

-- +goose Down
DROP TRIGGER steps_stats_delete;
DROP TRIGGER steps_stats_insert;
DROP TRIGGER steps_rollup_delete;
DROP TRIGGER steps_rollup_insert;
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
ALTER TABLE steps DROP COLUMN cost;
ALTER TABLE steps DROP COLUMN cached_tokens;
ALTER TABLE steps DROP COLUMN output_tokens;
ALTER TABLE steps DROP COLUMN input_tokens;
ALTER TABLE steps DROP COLUMN role;
