-- +goose Up
-- The minute rollups (00030) written as deltas appended to a table
-- without a key instead of an upsert of the (minute, session, run) row by
-- every INSERT: round seven measured that upsert at ≈ 25 µs of server CPU
-- per step in a 100-run benchmark (every row a group touches is a row the
-- next group of the same run updates again). The totals of a key are the
-- sum of its step_rollups row and of its step_rollups_pending rows; the
-- readers read step_rollups_all, which is both (store/postgres/metrics.go,
-- metrics_hours.go). An INSERT of steps appends one pending row per key of
-- its steps (no index to probe, no row to lock), a DELETE the negated
-- totals of the deleted steps, a status change its error delta. Every
-- 64th statement that appends folds the pending rows (one fold at a time,
-- under a transaction advisory lock taken without waiting): deleted and
-- added to step_rollups in one statement, so any reader's snapshot sees
-- each delta once. The fold reads no sessions row (the most updated rows
-- of the database): step_rollups loses its foreign key to sessions, and a
-- session's delete removes its pending deltas, then its rollups, each in
-- a statement of its own (so a fold that held some of them has committed
-- and its rows are seen); the deltas of its steps' cascade are not
-- written, the session being gone.
ALTER TABLE step_rollups DROP CONSTRAINT step_rollups_session_id_fkey;
CREATE TABLE step_rollups_pending (
    minute        BIGINT NOT NULL,
    session_id    TEXT COLLATE "C" NOT NULL,
    run_id        TEXT COLLATE "C" NOT NULL,
    steps         BIGINT NOT NULL,
    errors        BIGINT NOT NULL,
    input_tokens  BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cost          DOUBLE PRECISION NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
CREATE SEQUENCE step_rollups_appends;
CREATE VIEW step_rollups_all AS
    SELECT minute, session_id, run_id, steps, errors, input_tokens, output_tokens, cost FROM step_rollups
    UNION ALL
    SELECT minute, session_id, run_id, steps, errors, input_tokens, output_tokens, cost FROM step_rollups_pending;
-- +goose StatementBegin
-- jit off: a group's writes run under its SET LOCAL enable_seqscan = off,
-- which prices the scan of the pending rows (the only plan) past the JIT
-- thresholds, and a compilation costs the fold ~1 s of CPU.
CREATE FUNCTION step_rollups_fold() RETURNS void LANGUAGE plpgsql SET jit = off AS $$
BEGIN
    -- One fold at a time: two could add to the same rollup rows in
    -- different orders and deadlock; a writer that finds another folding
    -- leaves it the work.
    IF NOT pg_try_advisory_xact_lock(730511, hashtext(current_schema())) THEN
        RETURN;
    END IF;
    WITH d AS (DELETE FROM step_rollups_pending RETURNING *)
    INSERT INTO step_rollups AS ro
    SELECT minute, session_id, run_id, sum(steps), sum(errors), sum(input_tokens), sum(output_tokens), sum(cost)
    FROM d
    GROUP BY 1, 2, 3
    ON CONFLICT (minute, session_id, run_id) DO UPDATE SET steps = ro.steps + excluded.steps, errors = ro.errors + excluded.errors,
        input_tokens = ro.input_tokens + excluded.input_tokens, output_tokens = ro.output_tokens + excluded.output_tokens,
        cost = ro.cost + excluded.cost;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION steps_insert_totals() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s record;
BEGIN
    -- metric_hours_touch() of the inserted steps' hours (00080).
    PERFORM pg_advisory_xact_lock_shared(730510, hashtext(current_schema()));
    DELETE FROM metric_hours WHERE hour = ANY (ARRAY(SELECT DISTINCT created_at - created_at % 3600000000000 FROM new_steps));
    -- The minute rollups' deltas (00101).
    INSERT INTO step_rollups_pending
    SELECT created_at - created_at % 60000000000, session_id, run_id, count(*),
        count(*) FILTER (WHERE kind = 'error' OR status = 'failed'),
        COALESCE(sum(input_tokens), 0), COALESCE(sum(output_tokens), 0), COALESCE(sum(cost), 0)
    FROM new_steps
    GROUP BY 1, 2, 3;
    IF nextval('step_rollups_appends') % 64 = 0 THEN
        PERFORM step_rollups_fold();
    END IF;
    -- The session totals (00100): only the sessions whose steps went in at
    -- or below their watermark, or whose tail reached 256 steps.
    FOR s IN SELECT n.session_id, se.stats_through AS wm, n.lo, n.hi
        FROM (SELECT session_id, min(sequence) AS lo, max(sequence) AS hi FROM new_steps GROUP BY 1) n
        JOIN sessions se ON se.id = n.session_id
        WHERE n.lo <= se.stats_through OR n.hi - se.stats_through >= 256
    LOOP
        IF s.lo <= s.wm THEN
            INSERT INTO session_step_stats AS st
            SELECT session_id, kind, COALESCE(role, ''), count(*), COALESCE(sum(input_tokens), 0), COALESCE(sum(output_tokens), 0),
                COALESCE(sum(cached_tokens), 0), COALESCE(sum(cost), 0)
            FROM new_steps
            WHERE session_id = s.session_id AND sequence <= s.wm
            GROUP BY 1, 2, 3
            ON CONFLICT (session_id, kind, role) DO UPDATE SET steps = st.steps + excluded.steps,
                input_tokens = st.input_tokens + excluded.input_tokens, output_tokens = st.output_tokens + excluded.output_tokens,
                cached_tokens = st.cached_tokens + excluded.cached_tokens, cost = st.cost + excluded.cost;
        END IF;
        IF s.hi - s.wm >= 256 THEN
            PERFORM steps_stats_fold(s.session_id, s.wm);
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION steps_rollup_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO step_rollups_pending
    SELECT o.created_at - o.created_at % 60000000000, o.session_id, o.run_id, -count(*),
        -count(*) FILTER (WHERE o.kind = 'error' OR o.status = 'failed'),
        -COALESCE(sum(o.input_tokens), 0), -COALESCE(sum(o.output_tokens), 0), -COALESCE(sum(o.cost), 0)
    FROM old_steps o
    WHERE EXISTS (SELECT FROM sessions WHERE id = o.session_id)
    GROUP BY 1, 2, 3;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION steps_rollup_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO step_rollups_pending VALUES (OLD.created_at - OLD.created_at % 60000000000, OLD.session_id, OLD.run_id, 0,
        (NEW.kind = 'error' OR NEW.status = 'failed')::int - (OLD.kind = 'error' OR OLD.status = 'failed')::int, 0, 0, 0);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION step_rollups_pending_session() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM step_rollups_pending WHERE session_id = OLD.id;
    DELETE FROM step_rollups WHERE session_id = OLD.id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- After the cascade of the session's delete (RI_… triggers fire first, by
-- name): the steps' delete trigger then finds the session gone.
CREATE TRIGGER step_rollups_pending_session AFTER DELETE ON sessions FOR EACH ROW EXECUTE FUNCTION step_rollups_pending_session();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION metric_hours_run_agent() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r runs;
BEGIN
    IF TG_OP = 'INSERT' THEN r := NEW; ELSE r := OLD; END IF;
    IF r.agent IS DISTINCT FROM COALESCE((SELECT agent FROM sessions WHERE id = r.session_id), '') THEN
        PERFORM metric_hours_touch(ARRAY(
            SELECT minute - minute % 3600000000000 FROM step_rollups_all WHERE session_id = r.session_id AND run_id = r.id
            UNION SELECT created_at - created_at % 3600000000000 FROM evals WHERE run_id = r.id));
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
SELECT step_rollups_fold();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION metric_hours_run_agent() RETURNS trigger LANGUAGE plpgsql AS $$
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
DROP TRIGGER step_rollups_pending_session ON sessions;
DELETE FROM step_rollups ro WHERE NOT EXISTS (SELECT FROM sessions WHERE id = ro.session_id);
ALTER TABLE step_rollups ADD FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE;
DROP FUNCTION step_rollups_pending_session();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION steps_rollup_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE step_rollups SET errors = errors
        - (OLD.kind = 'error' OR OLD.status = 'failed')::int + (NEW.kind = 'error' OR NEW.status = 'failed')::int
    WHERE minute = OLD.created_at - OLD.created_at % 60000000000 AND session_id = OLD.session_id AND run_id = OLD.run_id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION steps_rollup_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE step_rollups ro SET steps = ro.steps - d.n, errors = ro.errors - d.e,
        input_tokens = ro.input_tokens - d.it, output_tokens = ro.output_tokens - d.ot, cost = ro.cost - d.c
    FROM (SELECT created_at - created_at % 60000000000 AS minute, session_id, run_id, count(*) AS n,
            count(*) FILTER (WHERE kind = 'error' OR status = 'failed') AS e,
            COALESCE(sum(input_tokens), 0) AS it, COALESCE(sum(output_tokens), 0) AS ot, COALESCE(sum(cost), 0) AS c
        FROM old_steps
        GROUP BY 1, 2, 3) d
    WHERE ro.minute = d.minute AND ro.session_id = d.session_id AND ro.run_id = d.run_id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION steps_insert_totals() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s record;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(730510, hashtext(current_schema()));
    DELETE FROM metric_hours WHERE hour = ANY (ARRAY(SELECT DISTINCT created_at - created_at % 3600000000000 FROM new_steps));
    INSERT INTO step_rollups AS ro
    SELECT created_at - created_at % 60000000000, session_id, run_id, count(*),
        count(*) FILTER (WHERE kind = 'error' OR status = 'failed'),
        COALESCE(sum(input_tokens), 0), COALESCE(sum(output_tokens), 0), COALESCE(sum(cost), 0)
    FROM new_steps
    GROUP BY 1, 2, 3
    ON CONFLICT (minute, session_id, run_id) DO UPDATE SET steps = ro.steps + excluded.steps, errors = ro.errors + excluded.errors,
        input_tokens = ro.input_tokens + excluded.input_tokens, output_tokens = ro.output_tokens + excluded.output_tokens,
        cost = ro.cost + excluded.cost;
    FOR s IN SELECT n.session_id, se.stats_through AS wm, n.lo, n.hi
        FROM (SELECT session_id, min(sequence) AS lo, max(sequence) AS hi FROM new_steps GROUP BY 1) n
        JOIN sessions se ON se.id = n.session_id
        WHERE n.lo <= se.stats_through OR n.hi - se.stats_through >= 256
    LOOP
        IF s.lo <= s.wm THEN
            INSERT INTO session_step_stats AS st
            SELECT session_id, kind, COALESCE(role, ''), count(*), COALESCE(sum(input_tokens), 0), COALESCE(sum(output_tokens), 0),
                COALESCE(sum(cached_tokens), 0), COALESCE(sum(cost), 0)
            FROM new_steps
            WHERE session_id = s.session_id AND sequence <= s.wm
            GROUP BY 1, 2, 3
            ON CONFLICT (session_id, kind, role) DO UPDATE SET steps = st.steps + excluded.steps,
                input_tokens = st.input_tokens + excluded.input_tokens, output_tokens = st.output_tokens + excluded.output_tokens,
                cached_tokens = st.cached_tokens + excluded.cached_tokens, cost = st.cost + excluded.cost;
        END IF;
        IF s.hi - s.wm >= 256 THEN
            PERFORM steps_stats_fold(s.session_id, s.wm);
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP FUNCTION step_rollups_fold();
DROP VIEW step_rollups_all;
DROP SEQUENCE step_rollups_appends;
DROP TABLE step_rollups_pending;
