-- +goose Up
-- One statement trigger after INSERT ON steps instead of three
-- (metric_hours_steps_insert, steps_rollup_insert, steps_stats_insert):
-- the same three writes, in the same order (the order PostgreSQL fired the
-- three triggers in, by name), from one PL/pgSQL call. Each trigger call
-- cost the server a function call, its executor and its scan set-up of
-- the transition table per INSERT statement, and the hour invalidation
-- went through metric_hours_touch(), whose DELETE … = ANY ($1) was
-- planned again on every call (a custom plan for a parameter): the
-- invalidation is inlined here, its statement planned once per
-- connection like the upserts. A group commit inserts its steps in one
-- statement, so this is per group, not per step. The DELETE triggers and
-- the row-level ones are unchanged.
-- +goose StatementBegin
CREATE FUNCTION steps_insert_totals() RETURNS trigger LANGUAGE plpgsql AS $$
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
    -- steps_stats_insert() (00075).
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
DROP TRIGGER metric_hours_steps_insert ON steps;
DROP TRIGGER steps_rollup_insert ON steps;
DROP TRIGGER steps_stats_insert ON steps;
DROP FUNCTION steps_rollup_insert();
DROP FUNCTION steps_stats_insert();
CREATE TRIGGER steps_insert_totals AFTER INSERT ON steps REFERENCING NEW TABLE AS new_steps
    FOR EACH STATEMENT EXECUTE FUNCTION steps_insert_totals();

-- +goose Down
DROP TRIGGER steps_insert_totals ON steps;
DROP FUNCTION steps_insert_totals();
-- +goose StatementBegin
CREATE FUNCTION steps_rollup_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO step_rollups AS ro
    SELECT created_at - created_at % 60000000000, session_id, run_id, count(*),
        count(*) FILTER (WHERE kind = 'error' OR status = 'failed'),
        COALESCE(sum(input_tokens), 0), COALESCE(sum(output_tokens), 0), COALESCE(sum(cost), 0)
    FROM new_steps
    GROUP BY 1, 2, 3
    ON CONFLICT (minute, session_id, run_id) DO UPDATE SET steps = ro.steps + excluded.steps, errors = ro.errors + excluded.errors,
        input_tokens = ro.input_tokens + excluded.input_tokens, output_tokens = ro.output_tokens + excluded.output_tokens,
        cost = ro.cost + excluded.cost;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION steps_stats_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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
CREATE TRIGGER metric_hours_steps_insert AFTER INSERT ON steps REFERENCING NEW TABLE AS changed_steps
    FOR EACH STATEMENT EXECUTE FUNCTION metric_hours_steps();
CREATE TRIGGER steps_rollup_insert AFTER INSERT ON steps REFERENCING NEW TABLE AS new_steps
    FOR EACH STATEMENT EXECUTE FUNCTION steps_rollup_insert();
CREATE TRIGGER steps_stats_insert AFTER INSERT ON steps REFERENCING NEW TABLE AS new_steps
    FOR EACH STATEMENT EXECUTE FUNCTION steps_stats_insert();
