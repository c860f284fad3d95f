-- +goose Up
-- A session's (kind, role) totals folded from its steps in batches instead
-- of an upsert of the session's hottest rows by every INSERT (00065,
-- 00090): round seven measured that upsert at ≈ 25 µs of server CPU per
-- step in a 100-run benchmark (each group's rows are every session's).
--
-- sessions.stats_through is the session's watermark: session_step_stats
-- holds exactly the totals of the session's steps with sequence <=
-- stats_through; the steps above it (the tail) are added by the reader
-- (stats.go, through the (session_id, sequence) index). The insert trigger
-- folds a session's tail when the statement leaves it 256 steps or more
-- above the watermark (one grouped read of the tail and one upsert per
-- 256 steps), so a reader adds at most 255 steps. Every writer of a
-- session's steps holds the session's row lock (FOR NO KEY UPDATE: the
-- group commit, the truncation, and the import since this migration), so
-- the tail read under it is every step above the watermark, committed or
-- the writer's own. A step inserted at or below the watermark (an import
-- into a fork of the copies of its inherited steps) is added to the
-- totals by its statement; a deleted step is subtracted only if it was
-- folded, and the watermark comes down to the session's last remaining
-- sequence, so a sequence reused after a truncation is in the tail.
ALTER TABLE sessions ADD COLUMN stats_through BIGINT NOT NULL DEFAULT 0;
-- Every step written before this migration is in the totals (00065).
UPDATE sessions se SET stats_through = m.hi
FROM (SELECT session_id, max(sequence) AS hi FROM steps GROUP BY 1) m
WHERE se.id = m.session_id;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION steps_insert_totals() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s record;
BEGIN
    -- metric_hours_touch() of the inserted steps' hours (00080).
    PERFORM pg_advisory_xact_lock_shared(730510, hashtext(current_schema()));
    DELETE FROM metric_hours WHERE hour = ANY (ARRAY(SELECT DISTINCT created_at - created_at % 3600000000000 FROM new_steps));
    -- steps_rollup_insert() (00075).
    INSERT INTO step_rollups AS ro
    SELECT created_at - created_at % 60000000000, session_id, run_id, count(*),
        count(*) FILTER (WHERE kind = 'error' OR status = 'failed'),
        COALESCE(sum(input_tokens), 0), COALESCE(sum(output_tokens), 0), COALESCE(sum(cost), 0)
    FROM new_steps
    GROUP BY 1, 2, 3
    ON CONFLICT (minute, session_id, run_id) DO UPDATE SET steps = ro.steps + excluded.steps, errors = ro.errors + excluded.errors,
        input_tokens = ro.input_tokens + excluded.input_tokens, output_tokens = ro.output_tokens + excluded.output_tokens,
        cost = ro.cost + excluded.cost;
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
-- steps_stats_fold adds the steps of session sid above watermark wm to its
-- totals and moves the watermark to the last of them. The caller holds the
-- session's row lock. jit off: its generic plans may price a long
-- session's range past the JIT thresholds (a compilation costs ~1 s).
CREATE FUNCTION steps_stats_fold(sid TEXT, wm BIGINT) RETURNS void LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    hi BIGINT;
BEGIN
    SELECT max(sequence) INTO hi FROM steps WHERE session_id = sid AND sequence > wm;
    IF hi IS NULL THEN
        RETURN;
    END IF;
    INSERT INTO session_step_stats AS st
    SELECT session_id, kind, COALESCE(role, ''), count(*), COALESCE(sum(input_tokens), 0), COALESCE(sum(output_tokens), 0),
        COALESCE(sum(cached_tokens), 0), COALESCE(sum(cost), 0)
    FROM steps
    WHERE session_id = sid AND sequence > wm AND sequence <= hi
    GROUP BY 1, 2, 3
    ON CONFLICT (session_id, kind, role) DO UPDATE SET steps = st.steps + excluded.steps,
        input_tokens = st.input_tokens + excluded.input_tokens, output_tokens = st.output_tokens + excluded.output_tokens,
        cached_tokens = st.cached_tokens + excluded.cached_tokens, cost = st.cost + excluded.cost;
    UPDATE sessions SET stats_through = hi WHERE id = sid;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION steps_stats_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Only the folded steps are in the totals.
    UPDATE session_step_stats st SET steps = st.steps - d.n, input_tokens = st.input_tokens - d.it,
        output_tokens = st.output_tokens - d.ot, cached_tokens = st.cached_tokens - d.ct, cost = st.cost - d.c
    FROM (SELECT o.session_id, o.kind, COALESCE(o.role, '') AS role, count(*) AS n, COALESCE(sum(o.input_tokens), 0) AS it,
            COALESCE(sum(o.output_tokens), 0) AS ot, COALESCE(sum(o.cached_tokens), 0) AS ct, COALESCE(sum(o.cost), 0) AS c
        FROM old_steps o JOIN sessions se ON se.id = o.session_id
        WHERE o.sequence <= se.stats_through
        GROUP BY 1, 2, 3) d
    WHERE st.session_id = d.session_id AND st.kind = d.kind AND st.role = d.role;
    -- The watermark no higher than the last step left, so that a sequence
    -- written again (after a truncation) is above it.
    UPDATE sessions se SET stats_through = COALESCE(m.hi, 0)
    FROM (SELECT DISTINCT session_id FROM old_steps) o
    LEFT JOIN LATERAL (SELECT max(sequence) AS hi FROM steps WHERE session_id = o.session_id) m ON true
    WHERE se.id = o.session_id AND se.stats_through > COALESCE(m.hi, 0);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- The tails folded, then the triggers of 00090 and 00075.
SELECT steps_stats_fold(id, stats_through) FROM sessions;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION steps_stats_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE session_step_stats st SET steps = st.steps - d.n, input_tokens = st.input_tokens - d.it,
        output_tokens = st.output_tokens - d.ot, cached_tokens = st.cached_tokens - d.ct, cost = st.cost - d.c
    FROM (SELECT session_id, kind, COALESCE(role, '') AS role, count(*) AS n, COALESCE(sum(input_tokens), 0) AS it,
            COALESCE(sum(output_tokens), 0) AS ot, COALESCE(sum(cached_tokens), 0) AS ct, COALESCE(sum(cost), 0) AS c
        FROM old_steps
        GROUP BY 1, 2, 3) d
    WHERE st.session_id = d.session_id AND st.kind = d.kind AND st.role = d.role;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION steps_insert_totals() RETURNS trigger LANGUAGE plpgsql AS $$
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
    INSERT INTO session_step_stats AS st
    SELECT session_id, kind, COALESCE(role, ''), count(*), COALESCE(sum(input_tokens), 0), COALESCE(sum(output_tokens), 0),
        COALESCE(sum(cached_tokens), 0), COALESCE(sum(cost), 0)
    FROM new_steps
    GROUP BY 1, 2, 3
    ON CONFLICT (session_id, kind, role) DO UPDATE SET steps = st.steps + excluded.steps,
        input_tokens = st.input_tokens + excluded.input_tokens, output_tokens = st.output_tokens + excluded.output_tokens,
        cached_tokens = st.cached_tokens + excluded.cached_tokens, cost = st.cost + excluded.cost;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP FUNCTION steps_stats_fold(TEXT, BIGINT);
ALTER TABLE sessions DROP COLUMN stats_through;
