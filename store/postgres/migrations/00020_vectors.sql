-- +goose Up
-- Step memory (docs/memory.md): one vector per step and embedder, beside the
-- immutable steps rows. Plain PostgreSQL, no extension: vectors are bytea,
-- and every open Store searches an exact in-process index of them
-- (store/internal/vecindex), kept current as described below.

-- Embedders: the name of a vector space and its dimension, fixed by its
-- first vector. last_seq numbers the embedder's vector writes: a writer
-- locks the row (so writes of one embedder commit in seq order) and stamps
-- each vector it writes with last_seq + 1, …; an index that has loaded the
-- rows up to seq N, in a snapshot where last_seq = N, reads only seq > N
-- next time, and can never miss a row committed late with a smaller seq.
-- deletes counts vector deletions (steps truncated, sessions deleted,
-- retention): an index that sees it move drops the vectors that are gone.
CREATE TABLE vector_embedders (
    name       TEXT COLLATE "C" PRIMARY KEY,
    dim        INTEGER NOT NULL CHECK (dim > 0),
    last_seq   BIGINT NOT NULL DEFAULT 0,
    deletes    BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    UNIQUE (name, dim) -- the target of step_vectors' (embedder, dim)
);

-- Step vectors: little-endian float32s, dim of them, as the embedder gave
-- them (not normalized). The database itself holds every vector to its
-- embedder's dimension: dim must match vector_embedders (foreign key) and
-- the bytes (check), whoever writes the row. A replaced vector gets a new
-- seq, so indexes read it again. session_id, run_id, kind and
-- step_created_at copy the step's immutable columns that searches filter
-- on, so loading an index needs no join.
CREATE TABLE step_vectors (
    step_id         TEXT COLLATE "C" NOT NULL REFERENCES steps (id) ON DELETE CASCADE,
    embedder        TEXT COLLATE "C" NOT NULL,
    dim             INTEGER NOT NULL,
    seq             BIGINT NOT NULL,
    session_id      TEXT COLLATE "C" NOT NULL,
    run_id          TEXT COLLATE "C" NOT NULL,
    kind            TEXT NOT NULL,
    step_created_at BIGINT NOT NULL,
    vector          BYTEA NOT NULL CHECK (octet_length(vector) = 4 * dim),
    created_at      BIGINT NOT NULL,
    PRIMARY KEY (step_id, embedder),
    FOREIGN KEY (embedder, dim) REFERENCES vector_embedders (name, dim)
);
CREATE UNIQUE INDEX step_vectors_load ON step_vectors (embedder, seq);

-- Counts deleted vectors per embedder, once per statement (a cascade from
-- steps runs one statement per deleted step; those that delete no vector
-- update nothing).
-- +goose StatementBegin
CREATE FUNCTION step_vectors_deleted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE vector_embedders e SET deletes = e.deletes + d.n
    FROM (SELECT embedder, count(*) AS n FROM gone GROUP BY embedder) d
    WHERE e.name = d.embedder;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER step_vectors_deleted AFTER DELETE ON step_vectors
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION step_vectors_deleted();

-- +goose Down
-- Forward-only: Stepwise never runs a Down migration; this documents the
-- inverse for a manual rollback.
DROP TRIGGER step_vectors_deleted ON step_vectors;
DROP FUNCTION step_vectors_deleted();
DROP TABLE step_vectors;
DROP TABLE vector_embedders;
