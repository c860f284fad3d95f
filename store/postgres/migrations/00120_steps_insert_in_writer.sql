-- +goose Up
-- The totals an INSERT of steps keeps (the metric hours' invalidation,
-- the minute rollups' deltas, the session totals' fold) written by the
-- writers' own statements instead of the statement trigger of 00090
-- (issue 34: every write earns its place). The trigger cost every group
-- commit a PL/pgSQL call, five statements run through SPI, and a
-- transition table that copied every inserted row, its body included
-- (≈ 20 % of the server's CPU per step with 100 concurrent runs). Now:
--
-- * the group commit (store/postgres/step_group_write.go) takes the
--   shared metric-hours lock in its first statement, inserts the steps,
--   invalidates their hours and appends their rollup deltas in one
--   statement (stepGroupInsertSQL, from the same parameters), folds the
--   sessions whose tail reached 256 steps in the next, and folds the
--   rollup deltas every 64th group (per process);
-- * the import, which inserts with ON CONFLICT DO NOTHING, calls
--   steps_inserted with the ids it inserted: the trigger's body over
--   those rows.
--
-- Nothing else inserts steps. The delete and status triggers are
-- unchanged (rare writes).
DROP TRIGGER steps_insert_totals ON steps;
DROP FUNCTION steps_insert_totals();
-- +goose StatementBegin
-- steps_inserted keeps the totals of the steps of ids, just inserted by
-- the caller's statement, as the insert trigger did (00101), under the
-- row locks of their sessions. jit off, as for the folds (00101): an import
-- of thousands of ids may price its lookups past the JIT thresholds.
CREATE FUNCTION steps_inserted(ids TEXT[]) RETURNS void LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    s record;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(730510, hashtext(current_schema()));
    DELETE FROM metric_hours WHERE hour = ANY (ARRAY(
        SELECT DISTINCT created_at - created_at % 3600000000000 FROM steps WHERE id = ANY (ids)));
    INSERT INTO step_rollups_pending
    SELECT created_at - created_at % 60000000000, session_id, run_id, count(*),
        count(*) FILTER (WHERE kind = 'error' OR status = 'failed'),
        COALESCE(sum(input_tokens), 0), COALESCE(sum(output_tokens), 0), COALESCE(sum(cost), 0)
    FROM steps WHERE id = ANY (ids)
    GROUP BY 1, 2, 3;
    IF nextval('step_rollups_appends') % 64 = 0 THEN
        PERFORM step_rollups_fold();
    END IF;
    FOR s IN SELECT n.session_id, se.stats_through AS wm, n.lo, n.hi
        FROM (SELECT session_id, min(sequence) AS lo, max(sequence) AS hi FROM steps WHERE id = ANY (ids) GROUP BY 1) n
        JOIN sessions se ON se.id = n.session_id
        WHERE n.lo <= se.stats_through OR n.hi - se.stats_through >= 256
    LOOP
        IF s.lo <= s.wm THEN
            INSERT INTO session_step_stats AS st
            SELECT session_id, kind, COALESCE(role, ''), count(*), COALESCE(sum(input_tokens), 0), COALESCE(sum(output_tokens), 0),
                COALESCE(sum(cached_tokens), 0), COALESCE(sum(cost), 0)
            FROM steps
            WHERE id = ANY (ids) AND session_id = s.session_id AND sequence <= s.wm
            GROUP BY 1, 2, 3
            ON CONFLICT (session_id, kind, role) DO UPDATE SET steps = st.steps + excluded.steps,
                input_tokens = st.input_tokens + excluded.input_tokens, output_tokens = st.output_tokens + excluded.output_tokens,
                cached_tokens = st.cached_tokens + excluded.cached_tokens, cost = st.cost + excluded.cost;
        END IF;
        IF s.hi - s.wm >= 256 THEN
            PERFORM steps_stats_fold(s.session_id, s.wm);
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION steps_inserted(TEXT[]);
-- +goose StatementBegin
CREATE FUNCTION steps_insert_totals() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s record;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(730510, hashtext(current_schema()));
    DELETE FROM metric_hours WHERE hour = ANY (ARRAY(SELECT DISTINCT created_at - created_at % 3600000000000 FROM new_steps));
    INSERT INTO step_rollups_pending
    SELECT created_at - created_at % 60000000000, session_id, run_id, count(*),
        count(*) FILTER (WHERE kind = 'error' OR status = 'failed'),
        COALESCE(sum(input_tokens), 0), COALESCE(sum(output_tokens), 0), COALESCE(sum(cost), 0)
    FROM new_steps
    GROUP BY 1, 2, 3;
    IF nextval('step_rollups_appends') % 64 = 0 THEN
        PERFORM step_rollups_fold();
    END IF;
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
CREATE TRIGGER steps_insert_totals AFTER INSERT ON steps REFERENCING NEW TABLE AS new_steps
    FOR EACH STATEMENT EXECUTE FUNCTION steps_insert_totals();
