-- +goose Up
-- The foreign key of steps.session_id replaced by the writers' own check
-- and a cascade trigger on sessions (issue 34). The key's check ran per
-- inserted row, after the statement: a queued trigger event and a lookup
-- of the session through SPI, FOR KEY SHARE, for a row every writer of
-- steps holds locked already (FOR NO KEY UPDATE: the group commit, which
-- fails an append to a missing session with not-found before it inserts,
-- and the import, which does the same since this migration). A session's
-- delete takes its row FOR UPDATE, so it waits for those writers and they
-- for it: once it has committed, an append finds the session gone.
-- sessions_delete_steps deletes a deleted session's steps, as ON DELETE
-- CASCADE did, in the same statement: the steps' delete triggers then find
-- the session gone, as after the cascade (00101).
ALTER TABLE steps DROP CONSTRAINT steps_session_id_fkey;
-- +goose StatementBegin
CREATE FUNCTION sessions_delete_steps() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM steps WHERE session_id = OLD.id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER sessions_delete_steps AFTER DELETE ON sessions FOR EACH ROW EXECUTE FUNCTION sessions_delete_steps();

-- +goose Down
DROP TRIGGER sessions_delete_steps ON sessions;
DROP FUNCTION sessions_delete_steps();
DELETE FROM steps st WHERE NOT EXISTS (SELECT FROM sessions WHERE id = st.session_id);
ALTER TABLE steps ADD CONSTRAINT steps_session_id_fkey FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE;
