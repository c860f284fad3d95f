package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"time"

	"github.com/stepwise-run/stepwise/store"
)

// Floor measures the physical floor of a durable step on the database at
// path, a Stepwise database that holds at least one step of a run: n raw
// transactions, each exactly what one committed step writes (BEGIN
// IMMEDIATE, one INSERT into steps with the body, role and usage of the
// file's last step, the run's UPDATE and the session's UPDATE, COMMIT),
// through the same driver,
// DSN, WAL mode and synchronous level as the store, with no engine, no JSON
// and no writer goroutine. It returns the mean time per transaction. The
// database must not be open in a Store: the rows it adds stay in the file.
func Floor(ctx context.Context, path, synchronous string, n int) (time.Duration, error) {
	cfg, abs, err := floorConfig(path, synchronous, n)
	if err != nil {
		return 0, err
	}
	db, err := sql.Open("sqlite", cfg.dsn(abs, true))
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
	st, err := prepare(ctx, conn)
	if err != nil {
		return 0, err
	}
	defer st.close()
	var sessionID, runID, kind, status, role string
	var body []byte
	var inTok, outTok, cachedTok int64
	var cost float64
	err = conn.QueryRowContext(ctx, `SELECT session_id, run_id, kind, status, body, role, input_tokens, output_tokens, cached_tokens, cost
		FROM steps WHERE run_id <> '' ORDER BY rowid DESC LIMIT 1`).Scan(&sessionID, &runID, &kind, &status, &body,
		&role, &inTok, &outTok, &cachedTok, &cost)
	if err != nil {
		return 0, fmt.Errorf("sqlite: floor: a step of a run: %w", err)
	}
	var seq int64
	if err := conn.QueryRowContext(ctx, `SELECT last_seq FROM sessions WHERE id = ?`, sessionID).Scan(&seq); err != nil {
		return 0, err
	}
	// The run's UPDATE writes back the run's own cursor, state and options,
	// so the row keeps its real size.
	var cursor string
	var state, opts []byte
	if err := conn.QueryRowContext(ctx, `SELECT cursor, state, options FROM runs WHERE id = ?`, runID).Scan(&cursor, &state, &opts); err != nil {
		return 0, err
	}
	start := time.Now()
	for i := range n {
		seq++
		now := time.Now().UnixNano()
		if _, err := st.begin.ExecContext(ctx); err != nil {
			return 0, err
		}
		_, err := st.stepInsert.ExecContext(ctx, fmt.Sprintf("floor-%d-%d", now, i), sessionID, seq, runID, kind,
			status, 0, now, body, 0, role, inTok, outTok, cachedTok, cost)
		if err == nil {
			_, err = st.runUpdateLight.ExecContext(ctx, cursor, state, "", nil, seq, opts, now, 0, runID)
		}
		if err == nil {
			_, err = st.sessionAppend.ExecContext(ctx, seq, int64(i), int64(i), 0.0, now, sessionID)
		}
		if err == nil {
			_, err = st.commit.ExecContext(ctx)
		}
		if err != nil {
			_, _ = st.rollback.ExecContext(ctx)
			return 0, err
		}
	}
	return time.Since(start) / time.Duration(n), nil
}

// floorConfig is the store configuration and absolute path a floor
// measurement of n transactions uses, checked as Open checks them.
func floorConfig(path, synchronous string, n int) (Config, string, error) {
	cfg := Config{Path: path, Synchronous: synchronous}.WithDefaults()
	if err := cfg.validate(); err != nil {
		return cfg, "", err
	}
	if n <= 0 {
		return cfg, "", fmt.Errorf("%w: sqlite: floor needs n > 0", store.ErrInvalid)
	}
	abs, err := filepath.Abs(path)
	return cfg, abs, err
}
