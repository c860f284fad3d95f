package postgres

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// errCommitRollback: COMMIT answered ROLLBACK (the transaction had failed).
var errCommitRollback = errors.New("stepwise: postgres: commit rolled back")

// wtx is a READ COMMITTED write transaction on one pooled connection.
// Its BEGIN travels with its first statement batch and its COMMIT with its
// last (send with commit), so the usual write — lock and read, then write —
// costs two round trips. Single statements (Exec, Query, QueryRow) begin
// the transaction first when needed.
type wtx struct {
	conn      *pgxpool.Conn
	commits   *commits // the Store's, numbering synchronous commits
	begun     bool
	committed bool
	async     bool // commits with synchronous_commit off (lazy)
	// flushes: the transaction surely wrote (a commit of nothing flushes
	// no WAL), so its synchronous commit is numbered for lazy writes.
	flushes bool
}

// commit sends COMMIT by send, numbered as a synchronous commit when the
// transaction flushes and is not lazy, and returns what send returned.
func (t *wtx) commit(send func() error) error {
	if !t.flushes || t.async || t.commits == nil {
		return send()
	}
	n := t.commits.begin()
	err := send()
	if err == nil {
		t.commits.succeeded(n)
	}
	return err
}

func (t *wtx) begin(ctx context.Context) error {
	if t.begun {
		return nil
	}
	if _, err := t.conn.Exec(ctx, `BEGIN`); err != nil {
		return err
	}
	t.begun = true
	return nil
}

// Exec runs one statement in the transaction.
func (t *wtx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.begin(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.conn.Exec(ctx, sql, args...)
}

// Query runs one query in the transaction.
func (t *wtx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.conn.Query(ctx, sql, args...)
}

// QueryRow runs one single-row query in the transaction.
func (t *wtx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.begin(ctx); err != nil {
		return errRow{err}
	}
	return t.conn.QueryRow(ctx, sql, args...)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// send runs b, pipelined in one round trip, with BEGIN in front when the
// transaction has not begun, and COMMIT behind when commit is set (b is
// then the transaction's last work). The callbacks queued on b run; the
// first error ends the batch and is returned, and the server skips the
// rest, COMMIT included.
func (t *wtx) send(ctx context.Context, b *pgx.Batch, commit bool) error {
	all := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+2)} // grown once
	if !t.begun {
		all.Queue(`BEGIN`)
	}
	all.QueuedQueries = append(all.QueuedQueries, b.QueuedQueries...)
	if commit {
		all.Queue(`COMMIT`).Exec(func(ct pgconn.CommandTag) error {
			if ct.String() == "ROLLBACK" {
				return errCommitRollback
			}
			return nil
		})
	}
	t.begun = true // whatever happened: the runner ends it
	useSendBuffer(t.conn.Conn().PgConn(), all)
	sendAll := func() error { return t.conn.SendBatch(ctx, all).Close() }
	var err error
	if commit {
		err = t.commit(sendAll)
	} else {
		err = sendAll()
	}
	t.committed = commit && err == nil
	return err
}

// inTx runs fn in a write transaction and commits it. Writers take row
// locks (SELECT … FOR NO KEY UPDATE) on what they change, in id order, so
// READ COMMITTED is enough; when the transaction still fails with a
// serialization failure or a deadlock, or fn reports errRaced, the whole
// transaction runs again, up to Config.Retries times, after a short
// jittered pause. fn must therefore have no effect outside the
// transaction but its result. Errors come back through mapErr.
//
// A nil error means committed. When ctx ends during COMMIT the outcome is
// unknown to the caller; StepAppend is idempotent by step id, so a retry
// is safe.
func inTx[T any](s *Store, ctx context.Context, fn func(tx *wtx) (T, error)) (T, error) {
	var zero T
	if err := s.usable(); err != nil {
		return zero, err
	}
	for attempt := 0; ; attempt++ {
		v, err := runTx(s, ctx, fn)
		if err == nil {
			return v, nil
		}
		if attempt >= s.cfg.Retries || !retryable(err) || ctx.Err() != nil {
			return zero, mapErr(err)
		}
		// 1–4ms, doubling per attempt: time for the winner of a lock race
		// to commit.
		d := time.Duration(1+rand.IntN(4)) * time.Millisecond << min(attempt, 5)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
}

func runTx[T any](s *Store, ctx context.Context, fn func(tx *wtx) (T, error)) (v T, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return v, err
	}
	defer conn.Release()
	t := &wtx{conn: conn, commits: &s.commits}
	defer func() {
		if err != nil && conn.Conn().PgConn().TxStatus() != 'I' && !conn.Conn().IsClosed() {
			// Roll back on a fresh context: ctx may be what failed. A
			// connection left in a transaction is destroyed on release.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_, _ = conn.Exec(rctx, `ROLLBACK`)
		}
	}()
	if v, err = fn(t); err != nil {
		return v, err
	}
	if t.begun && !t.committed {
		return v, t.commit(func() error {
			ct, err := conn.Exec(ctx, `COMMIT`)
			if err == nil && ct.String() == "ROLLBACK" {
				err = errCommitRollback
			}
			return err
		})
	}
	return v, nil
}
