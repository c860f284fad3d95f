package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"strings"
)

// The rollups (step_rollups, per minute and run) and statistics
// (session_step_stats, per session, kind and role) hold the steps up to
// the rowid in step_fold; the steps after it are the tail (migration
// 00200). No trigger runs per inserted step: the writer folds the tail
// into both tables once it holds foldEvery steps, in the transaction of
// the write that reached it, and when the store closes; the reads add the
// tail, read from the steps by rowid in the same read transaction as the
// folded rows, so they are exact. A crash loses no rollup: the tail is
// the steps themselves, folded by a later write.

// foldEvery is the tail length (in rowids) at which a write folds it. A
// fold of n steps costs about the pages of one step (two rollup and
// statistics leaves, the mark), so 512 makes it ~0.005 page per step; a
// read of the rollups adds at most that many steps, one rowid range.
const foldEvery = 512

// foldState is the writer's view of the tail: upto is the mark as this
// writer last read or wrote it, last the highest rowid it has inserted.
// It only decides when to fold (a delete may lower the mark behind its
// back): the fold reads both from the database.
type foldState struct {
	upto, last int64
	pending    int64 // the mark a fold in the open transaction set, 0: none
}

// foldRollupsSQL adds the tail to step_rollups, foldStatsSQL to
// session_step_stats, foldTimesSQL to step_times (the folded steps by
// time), foldMarkSQL moves the mark past it.
const (
	foldRollupsSQL = `INSERT INTO step_rollups
SELECT created_at - created_at % 60000000000, session_id, run_id, count(*), sum(kind = 'error' OR status = 'failed'),
	sum(input_tokens), sum(output_tokens), sum(cost)
FROM steps WHERE rowid > (SELECT upto FROM step_fold) GROUP BY 1, 2, 3
ON CONFLICT DO UPDATE SET steps = steps + excluded.steps, errors = errors + excluded.errors,
	input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens,
	cost = cost + excluded.cost`
	foldStatsSQL = `INSERT INTO session_step_stats
SELECT session_id, kind, role, count(*), sum(input_tokens), sum(output_tokens), sum(cached_tokens), sum(cost)
FROM steps WHERE rowid > (SELECT upto FROM step_fold) GROUP BY 1, 2, 3
ON CONFLICT DO UPDATE SET steps = steps + excluded.steps, input_tokens = input_tokens + excluded.input_tokens,
	output_tokens = output_tokens + excluded.output_tokens, cached_tokens = cached_tokens + excluded.cached_tokens,
	cost = cost + excluded.cost`
	foldTimesSQL = `INSERT INTO step_times SELECT created_at, rowid FROM steps WHERE rowid > (SELECT upto FROM step_fold)`
	foldMarkSQL  = `UPDATE step_fold SET upto = (SELECT coalesce(max(rowid), 0) FROM steps) RETURNING upto`
)

// loadFold reads the mark and the highest rowid at open.
func loadFold(ctx context.Context, c *sql.Conn) (foldState, error) {
	var f foldState
	err := c.QueryRowContext(ctx, `SELECT (SELECT upto FROM step_fold), (SELECT coalesce(max(rowid), 0) FROM steps)`).
		Scan(&f.upto, &f.last)
	return f, err
}

// noteInsert records the rowid of a step just inserted.
func (tx *wtx) noteInsert(res sql.Result) {
	if tx.fold == nil {
		return
	}
	if id, err := res.LastInsertId(); err == nil && id > tx.fold.last {
		tx.fold.last = id
	}
}

// maybeFold folds the tail in the open transaction when it is long
// enough, or always with force. A failed fold is rolled back alone: the
// tail stays, the reads stay exact, and a later write tries again.
func (w *writer) maybeFold(force bool) {
	f := &w.fold
	if !force && f.last-f.upto < foldEvery {
		return
	}
	c := w.conn
	if _, err := c.ExecContext(bg, `SAVEPOINT fold`); err != nil {
		return
	}
	upto, err := foldTail(c)
	if err != nil {
		_, _ = c.ExecContext(bg, `ROLLBACK TO fold`)
		_, _ = c.ExecContext(bg, `RELEASE fold`)
		return
	}
	if _, err := c.ExecContext(bg, `RELEASE fold`); err != nil {
		return
	}
	f.pending = upto
}

// foldTail adds the tail to both tables and returns the new mark.
func foldTail(c *sql.Conn) (int64, error) {
	if _, err := c.ExecContext(bg, foldRollupsSQL); err != nil {
		return 0, err
	}
	if _, err := c.ExecContext(bg, foldStatsSQL); err != nil {
		return 0, err
	}
	if _, err := c.ExecContext(bg, foldTimesSQL); err != nil {
		return 0, err
	}
	var upto int64
	err := c.QueryRowContext(bg, foldMarkSQL).Scan(&upto)
	return upto, err
}

// folded applies the mark of a committed fold (the highest rowid then);
// rolledBack drops it.
func (f *foldState) folded() {
	if f.pending > 0 {
		f.upto, f.last = f.pending, f.pending
	}
	f.pending = 0
}

func (f *foldState) rolledBack() { f.pending = 0 }

// foldAll folds the whole tail in a transaction of its own (at close).
func (w *writer) foldAll() error {
	if w.fold.last <= w.fold.upto {
		return nil
	}
	if _, err := w.st.begin.ExecContext(bg); err != nil {
		return err
	}
	if _, err := foldTail(w.conn); err != nil {
		_, _ = w.st.rollback.ExecContext(bg)
		return err
	}
	_, err := w.st.commit.ExecContext(bg)
	return err
}

// noFold is the mark of a database without step_fold (a read-only store
// on a schema before migration 00200, whose triggers kept the tables
// whole): no tail.
const noFold = math.MaxInt64

// readUpto reads the mark in a read transaction.
func readUpto(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (int64, error) {
	var upto int64
	err := q.QueryRowContext(ctx, `SELECT upto FROM step_fold`).Scan(&upto)
	if err != nil && (errors.Is(err, sql.ErrNoRows) || strings.Contains(err.Error(), "no such table")) {
		return noFold, nil
	}
	return upto, err
}
