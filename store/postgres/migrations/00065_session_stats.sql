-- +goose Up
-- Per-session totals (store.SessionStatsReader, a session's summary):
-- steps by kind and role with their usage and cost, runs by status,
-- maintained by triggers as rows are written, so summarizing a session of
-- a million steps reads a few rows. Steps: statement-level triggers with
-- transition tables (one grouped upsert per INSERT statement), like
-- step_rollups; runs: row-level (a run changes status a few times).
CREATE TABLE session_step_stats (
    session_id    TEXT COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    kind          TEXT NOT NULL,
    role          TEXT NOT NULL,
    steps         BIGINT NOT NULL,
    input_tokens  BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cached_tokens BIGINT NOT NULL,
    cost          DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (session_id, kind, role)
) WITH (fillfactor = 50);
CREATE TABLE session_run_stats (
    session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    status     TEXT NOT NULL,
    runs       BIGINT NOT NULL,
    PRIMARY KEY (session_id, status)
) WITH (fillfactor = 50);
-- +goose StatementBegin
CREATE FUNCTION steps_stats_insert() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE FUNCTION steps_stats_delete() RETURNS trigger LANGUAGE plpgsql AS $$
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
-- +goose StatementBegin
CREATE FUNCTION runs_stats_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE session_run_stats SET runs = runs - 1 WHERE session_id = OLD.session_id AND status = OLD.status;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO session_run_stats AS st VALUES (NEW.session_id, NEW.status, 1)
        ON CONFLICT (session_id, status) DO UPDATE SET runs = st.runs + 1;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER steps_stats_insert AFTER INSERT ON steps REFERENCING NEW TABLE AS new_steps
    FOR EACH STATEMENT EXECUTE FUNCTION steps_stats_insert();
CREATE TRIGGER steps_stats_delete AFTER DELETE ON steps REFERENCING OLD TABLE AS old_steps
    FOR EACH STATEMENT EXECUTE FUNCTION steps_stats_delete();
CREATE TRIGGER runs_stats_insert AFTER INSERT OR DELETE ON runs FOR EACH ROW EXECUTE FUNCTION runs_stats_change();
CREATE TRIGGER runs_stats_status AFTER UPDATE OF status ON runs FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION runs_stats_change();
-- The waiting runs, newest first: the engine's sweep for parents left
-- waiting lists them every 30 s (without it, a scan of every run).
CREATE INDEX runs_waiting ON runs (created_at DESC, id DESC) WHERE status = 'waiting';
-- Rows written before this migration.
INSERT INTO session_step_stats
SELECT session_id, kind, COALESCE(j ->> 'role', ''), count(*),
    sum(COALESCE((j -> 'metrics' ->> 'input_tokens')::bigint, 0)), sum(COALESCE((j -> 'metrics' ->> 'output_tokens')::bigint, 0)),
    sum(COALESCE((j -> 'metrics' ->> 'cached_tokens')::bigint, 0)), sum(COALESCE((j -> 'metrics' ->> 'cost')::double precision, 0))
FROM (SELECT session_id, kind, convert_from(body, 'UTF8')::jsonb AS j FROM steps) s
GROUP BY 1, 2, 3;
INSERT INTO session_run_stats SELECT session_id, status, count(*) FROM runs GROUP BY 1, 2;

-- +goose Down
DROP INDEX runs_waiting;
DROP TRIGGER runs_stats_status ON runs;
DROP TRIGGER runs_stats_insert ON runs;
DROP TRIGGER steps_stats_delete ON steps;
DROP TRIGGER steps_stats_insert ON steps;
DROP FUNCTION runs_stats_change();
DROP FUNCTION steps_stats_delete();
DROP FUNCTION steps_stats_insert();
DROP TABLE session_run_stats;
DROP TABLE session_step_stats;
