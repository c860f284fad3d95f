package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"time"
)

// floorMinimalDDL is the minimal schema of the reference floor
// (docs/PERFORMANCE.md): the step and run tables as the product has them
// (TEXT primary key, UNIQUE (session_id, sequence), the two partial
// indexes of steps, one index of runs) and the session row, without any
// trigger or other index.
var floorMinimalDDL = []string{
	`CREATE TABLE sessions (id TEXT PRIMARY KEY, last_seq INTEGER NOT NULL DEFAULT 0, input_tokens INTEGER NOT NULL DEFAULT 0,
		output_tokens INTEGER NOT NULL DEFAULT 0, cost REAL NOT NULL DEFAULT 0, updated_at INTEGER NOT NULL DEFAULT 0) STRICT`,
	`CREATE TABLE steps (id TEXT PRIMARY KEY, session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
		sequence INTEGER NOT NULL, run_id TEXT NOT NULL DEFAULT '', kind TEXT NOT NULL, status TEXT NOT NULL,
		hop INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL, body BLOB NOT NULL, UNIQUE (session_id, sequence)) STRICT`,
	`CREATE INDEX steps_run ON steps (run_id, sequence) WHERE run_id <> ''`,
	`CREATE INDEX steps_waiting ON steps (run_id) WHERE status = 'waiting'`,
	`CREATE TABLE runs (id TEXT PRIMARY KEY, session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
		status TEXT NOT NULL, cursor TEXT NOT NULL DEFAULT '', state BLOB, step_count INTEGER NOT NULL DEFAULT 0,
		created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL) STRICT`,
	`CREATE INDEX runs_session ON runs (session_id, created_at DESC, id DESC)`,
	`INSERT INTO sessions (id) VALUES ('s')`,
	`INSERT INTO runs (id, session_id, status, created_at, updated_at) VALUES ('r', 's', 'running', 0, 0)`,
}

// FloorMinimal measures the floor of a durable step on the minimal schema
// (floorMinimalDDL) in a new file beside path, which it removes after: n
// transactions of one INSERT of a step with the body of the last step of
// the database at path, the run's UPDATE (with that run's state) and the
// session's UPDATE, through the same driver, DSN, WAL mode and
// synchronous level as the store. Floor measures the same transaction on
// the product's schema; the two ratios say what the engine costs over the
// database and what the schema costs over the rows themselves.
func FloorMinimal(ctx context.Context, path, synchronous string, n int) (time.Duration, error) {
	cfg, abs, err := floorConfig(path, synchronous, n)
	if err != nil {
		return 0, err
	}
	var body, state []byte
	src, err := sql.Open("sqlite", cfg.dsn(abs, true))
	if err != nil {
		return 0, err
	}
	err = src.QueryRowContext(ctx, `SELECT s.body, r.state FROM steps s JOIN runs r ON r.id = s.run_id
		WHERE s.run_id <> '' ORDER BY s.rowid DESC LIMIT 1`).Scan(&body, &state)
	src.Close()
	if err != nil {
		return 0, fmt.Errorf("sqlite: minimal floor: a step of a run: %w", err)
	}
	mpath := abs + ".minimal"
	defer func() {
		for _, s := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(mpath + s)
		}
	}()
	db, err := sql.Open("sqlite", cfg.dsn(mpath, true))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	for _, q := range floorMinimalDDL {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return 0, fmt.Errorf("sqlite: minimal floor: %w", err)
		}
	}
	var stmts [5]*sql.Stmt
	for i, q := range []string{`BEGIN IMMEDIATE`, `COMMIT`,
		`INSERT INTO steps (id, session_id, sequence, run_id, kind, status, hop, created_at, body) VALUES (?, 's', ?, 'r', 'llm', 'completed', 0, ?, ?)`,
		`UPDATE runs SET status = 'running', cursor = 'next', state = ?, step_count = ?, updated_at = ? WHERE id = 'r'`,
		`UPDATE sessions SET last_seq = ?, input_tokens = ?, output_tokens = ?, cost = ?, updated_at = ? WHERE id = 's'`,
	} {
		if stmts[i], err = conn.PrepareContext(ctx, q); err != nil {
			return 0, err
		}
		defer stmts[i].Close()
	}
	begin, commit, ins, run, sess := stmts[0], stmts[1], stmts[2], stmts[3], stmts[4]
	start := time.Now()
	for i := range n {
		now := time.Now().UnixNano()
		if _, err := begin.ExecContext(ctx); err != nil {
			return 0, err
		}
		_, err := ins.ExecContext(ctx, fmt.Sprintf("floor-%d-%d", now, i), i+1, now, body)
		if err == nil {
			_, err = run.ExecContext(ctx, state, i+1, now)
		}
		if err == nil {
			_, err = sess.ExecContext(ctx, i+1, int64(i), int64(i), 0.0, now)
		}
		if err == nil {
			_, err = commit.ExecContext(ctx)
		}
		if err != nil {
			_, _ = conn.ExecContext(ctx, `ROLLBACK`)
			return 0, err
		}
	}
	return time.Since(start) / time.Duration(n), nil
}
