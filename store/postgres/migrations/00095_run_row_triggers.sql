-- +goose Up
-- One row trigger per kind of write on runs instead of six triggers: the
-- same writes, in the same order (the order PostgreSQL fired them in, by
-- name: metric_hours_runs_agent, metric_hours_runs_insert / _update /
-- _delete, runs_stats_insert / runs_stats_status), from one PL/pgSQL call.
-- A run is written a few times in its life (created, claimed, finished),
-- and each write fired up to three PL/pgSQL calls: a finish called
-- metric_hours_row(), which called metric_hours_touch(), and
-- runs_stats_change(). The hour invalidation is inlined here (as 00090 did
-- for steps), and a change of status moves the run between the session's
-- counts with one upsert of both rows (in status order, so two changes of
-- one session lock them in the same order) instead of an UPDATE and an
-- upsert. The UPDATE trigger fires, as before, only when the status, or a
-- column of a finished run's hour, changed: the per-step updates of a run
-- (cursor, step count, state) fire nothing.
-- +goose StatementBegin
CREATE FUNCTION runs_insert_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- metric_hours_run_agent() (00080): a run whose agent is not its
    -- session's changes the agent of the steps and evals that name it.
    IF NEW.agent IS DISTINCT FROM COALESCE((SELECT agent FROM sessions WHERE id = NEW.session_id), '') THEN
        PERFORM pg_advisory_xact_lock_shared(730510, hashtext(current_schema()));
        DELETE FROM metric_hours WHERE hour = ANY (ARRAY(
            SELECT minute - minute % 3600000000000 FROM step_rollups WHERE session_id = NEW.session_id AND run_id = NEW.id
            UNION SELECT created_at - created_at % 3600000000000 FROM evals WHERE run_id = NEW.id));
    END IF;
    -- metric_hours_runs_insert (00080).
    IF NEW.finished_at > 0 THEN
        PERFORM pg_advisory_xact_lock_shared(730510, hashtext(current_schema()));
        DELETE FROM metric_hours WHERE hour = NEW.finished_at - NEW.finished_at % 3600000000000;
    END IF;
    -- runs_stats_insert (00065).
    INSERT INTO session_run_stats AS st VALUES (NEW.session_id, NEW.status, 1)
    ON CONFLICT (session_id, status) DO UPDATE SET runs = st.runs + 1;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION runs_update_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- metric_hours_runs_update (00080).
    IF (OLD.finished_at > 0 OR NEW.finished_at > 0) AND (OLD.finished_at, OLD.status, OLD.created_at, OLD.agent)
            IS DISTINCT FROM (NEW.finished_at, NEW.status, NEW.created_at, NEW.agent) THEN
        PERFORM pg_advisory_xact_lock_shared(730510, hashtext(current_schema()));
        DELETE FROM metric_hours WHERE hour IN (OLD.finished_at - OLD.finished_at % 3600000000000,
            NEW.finished_at - NEW.finished_at % 3600000000000);
    END IF;
    -- runs_stats_status (00065): one run less in the old status, one more
    -- in the new.
    IF OLD.status IS DISTINCT FROM NEW.status THEN
        INSERT INTO session_run_stats AS st
        SELECT * FROM (VALUES (OLD.session_id, OLD.status, -1), (NEW.session_id, NEW.status, 1)) v (session_id, status, runs)
        ORDER BY status
        ON CONFLICT (session_id, status) DO UPDATE SET runs = st.runs + excluded.runs;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION runs_delete_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- metric_hours_run_agent() (00080).
    IF OLD.agent IS DISTINCT FROM COALESCE((SELECT agent FROM sessions WHERE id = OLD.session_id), '') THEN
        PERFORM pg_advisory_xact_lock_shared(730510, hashtext(current_schema()));
        DELETE FROM metric_hours WHERE hour = ANY (ARRAY(
            SELECT minute - minute % 3600000000000 FROM step_rollups WHERE session_id = OLD.session_id AND run_id = OLD.id
            UNION SELECT created_at - created_at % 3600000000000 FROM evals WHERE run_id = OLD.id));
    END IF;
    -- metric_hours_runs_delete (00080).
    IF OLD.finished_at > 0 THEN
        PERFORM pg_advisory_xact_lock_shared(730510, hashtext(current_schema()));
        DELETE FROM metric_hours WHERE hour = OLD.finished_at - OLD.finished_at % 3600000000000;
    END IF;
    -- runs_stats_insert (00065), on DELETE.
    UPDATE session_run_stats SET runs = runs - 1 WHERE session_id = OLD.session_id AND status = OLD.status;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP TRIGGER metric_hours_runs_agent ON runs;
DROP TRIGGER metric_hours_runs_insert ON runs;
DROP TRIGGER metric_hours_runs_update ON runs;
DROP TRIGGER metric_hours_runs_delete ON runs;
DROP TRIGGER runs_stats_insert ON runs;
DROP TRIGGER runs_stats_status ON runs;
DROP FUNCTION metric_hours_run_agent();
DROP FUNCTION runs_stats_change();
CREATE TRIGGER runs_insert_row AFTER INSERT ON runs FOR EACH ROW EXECUTE FUNCTION runs_insert_row();
CREATE TRIGGER runs_update_row AFTER UPDATE OF status, finished_at, created_at, agent ON runs FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status OR ((OLD.finished_at > 0 OR NEW.finished_at > 0)
        AND (OLD.finished_at, OLD.status, OLD.created_at, OLD.agent) IS DISTINCT FROM (NEW.finished_at, NEW.status, NEW.created_at, NEW.agent)))
    EXECUTE FUNCTION runs_update_row();
CREATE TRIGGER runs_delete_row AFTER DELETE ON runs FOR EACH ROW EXECUTE FUNCTION runs_delete_row();

-- +goose Down
DROP TRIGGER runs_delete_row ON runs;
DROP TRIGGER runs_update_row ON runs;
DROP TRIGGER runs_insert_row ON runs;
DROP FUNCTION runs_delete_row();
DROP FUNCTION runs_update_row();
DROP FUNCTION runs_insert_row();
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
CREATE TRIGGER runs_stats_insert AFTER INSERT OR DELETE ON runs FOR EACH ROW EXECUTE FUNCTION runs_stats_change();
CREATE TRIGGER runs_stats_status AFTER UPDATE OF status ON runs FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION runs_stats_change();
CREATE TRIGGER metric_hours_runs_insert AFTER INSERT ON runs FOR EACH ROW
    WHEN (NEW.finished_at > 0) EXECUTE FUNCTION metric_hours_row();
CREATE TRIGGER metric_hours_runs_update AFTER UPDATE OF finished_at, status, created_at, agent ON runs FOR EACH ROW
    WHEN ((OLD.finished_at > 0 OR NEW.finished_at > 0) AND (OLD.finished_at, OLD.status, OLD.created_at, OLD.agent)
        IS DISTINCT FROM (NEW.finished_at, NEW.status, NEW.created_at, NEW.agent))
    EXECUTE FUNCTION metric_hours_row();
CREATE TRIGGER metric_hours_runs_delete AFTER DELETE ON runs FOR EACH ROW
    WHEN (OLD.finished_at > 0) EXECUTE FUNCTION metric_hours_row();
CREATE TRIGGER metric_hours_runs_agent AFTER INSERT OR DELETE ON runs FOR EACH ROW EXECUTE FUNCTION metric_hours_run_agent();
