-- +goose Up
-- Step memory (docs/memory.md): one vector per step and embedder, beside the
-- immutable steps rows.

-- Embedders: the name of a vector space and its dimension, fixed by its
-- first vector. deletes counts vector deletions (steps truncated, sessions
-- deleted): the in-process search index of every open store compares it to
-- drop the vectors of deleted steps.
CREATE TABLE vector_embedders (
    name       TEXT PRIMARY KEY,
    dim        INTEGER NOT NULL CHECK (dim > 0),
    deletes    INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
) STRICT;

-- Step vectors: little-endian float32s, dim of them, as the embedder gave
-- them (not normalized). id only grows (AUTOINCREMENT): an index that has
-- loaded the rows up to id N reads the newer ones with id > N. A replaced
-- vector is a new row (INSERT OR REPLACE), so it is read again too.
-- session_id, run_id, kind and step_created_at copy the step's immutable
-- columns that searches filter on, so loading an index needs no join.
CREATE TABLE step_vectors (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    step_id         TEXT NOT NULL REFERENCES steps (id) ON DELETE CASCADE,
    embedder        TEXT NOT NULL REFERENCES vector_embedders (name),
    session_id      TEXT NOT NULL,
    run_id          TEXT NOT NULL,
    kind            TEXT NOT NULL,
    step_created_at INTEGER NOT NULL,
    vector          BLOB NOT NULL,
    created_at      INTEGER NOT NULL,
    UNIQUE (step_id, embedder)
) STRICT;
CREATE INDEX step_vectors_load ON step_vectors (embedder, id);

-- Fires for deletes (cascaded from steps too), not for the implicit delete
-- of INSERT OR REPLACE (recursive_triggers is off).
-- +goose StatementBegin
CREATE TRIGGER step_vectors_deleted AFTER DELETE ON step_vectors BEGIN
    UPDATE vector_embedders SET deletes = deletes + 1 WHERE name = OLD.embedder;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER step_vectors_deleted;
DROP TABLE step_vectors;
DROP TABLE vector_embedders;
