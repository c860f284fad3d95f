-- +goose Up
-- A step's role and usage as columns, written by the driver from the step
-- it encodes (stepInsertSQL, the only INSERT INTO steps), so the
-- statement triggers that keep step_rollups (00030) and session_step_stats
-- (00065) sum columns of the transition tables instead of parsing every
-- body twice (json, then jsonb) per inserted or deleted step. The body
-- stays the record; the columns are what it says, set once. An empty role
-- and a zero are stored as NULL (the driver's NULLIF): a row then pays the
-- null bitmap (8 bytes with alignment) instead of 40 bytes of zeros, and
-- a step with usage its values. Adding nullable columns rewrites nothing;
-- the rows written before are updated only when their body has a role or
-- metrics.
ALTER TABLE steps ADD COLUMN role TEXT,
    ADD COLUMN input_tokens BIGINT,
    ADD COLUMN output_tokens BIGINT,
    ADD COLUMN cached_tokens BIGINT,
    ADD COLUMN cost DOUBLE PRECISION;
-- Steps written before this migration (the status trigger is not fired:
-- status is not set).
UPDATE steps s SET role = NULLIF(j ->> 'role', ''),
    input_tokens = NULLIF((j -> 'metrics' ->> 'input_tokens')::bigint, 0),
    output_tokens = NULLIF((j -> 'metrics' ->> 'output_tokens')::bigint, 0),
    cached_tokens = NULLIF((j -> 'metrics' ->> 'cached_tokens')::bigint, 0),
    cost = NULLIF((j -> 'metrics' ->> 'cost')::double precision, 0)
FROM (SELECT id, convert_from(body, 'UTF8')::jsonb AS j FROM steps) b
WHERE s.id = b.id AND (j ? 'role' OR j ? 'metrics');
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION steps_rollup_insert() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE OR REPLACE FUNCTION steps_stats_insert() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION steps_rollup_insert() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE OR REPLACE FUNCTION steps_rollup_delete() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE OR REPLACE FUNCTION steps_stats_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO session_step_stats AS st
    SELECT session_id, kind, COALESCE(j ->> 'role', ''), count(*),
        sum(COALESCE((j -> 'metrics' ->> 'input_tokens')::bigint, 0)), sum(COALESCE((j -> 'metrics' ->> 'output_tokens')::bigint, 0)),
        sum(COALESCE((j -> 'metrics' ->> 'cached_tokens')::bigint, 0)), sum(COALESCE((j -> 'metrics' ->> 'cost')::double precision, 0))
    FROM (SELECT session_id, kind, convert_from(body, 'UTF8')::jsonb AS j FROM new_steps) s
    GROUP BY 1, 2, 3
    ON CONFLICT (session_id, kind, role) DO UPDATE SET steps = st.steps + excluded.steps,
        input_tokens = st.input_tokens + excluded.input_tokens, output_tokens = st.output_tokens + excluded.output_tokens,
        cached_tokens = st.cached_tokens + excluded.cached_tokens, cost = st.cost + excluded.cost;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION steps_stats_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE session_step_stats st SET steps = st.steps - d.n, input_tokens = st.input_tokens - d.it,
        output_tokens = st.output_tokens - d.ot, cached_tokens = st.cached_tokens - d.ct, cost = st.cost - d.c
    FROM (SELECT session_id, kind, COALESCE(j ->> 'role', '') AS role, count(*) AS n,
            sum(COALESCE((j -> 'metrics' ->> 'input_tokens')::bigint, 0)) AS it, sum(COALESCE((j -> 'metrics' ->> 'output_tokens')::bigint, 0)) AS ot,
            sum(COALESCE((j -> 'metrics' ->> 'cached_tokens')::bigint, 0)) AS ct, sum(COALESCE((j -> 'metrics' ->> 'cost')::double precision, 0)) AS c
        FROM (SELECT session_id, kind, convert_from(body, 'UTF8')::jsonb AS j FROM old_steps) o
        GROUP BY 1, 2, 3) d
    WHERE st.session_id = d.session_id AND st.kind = d.kind AND st.role = d.role;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
ALTER TABLE steps DROP COLUMN cost, DROP COLUMN cached_tokens, DROP COLUMN output_tokens, DROP COLUMN input_tokens, DROP COLUMN role;
