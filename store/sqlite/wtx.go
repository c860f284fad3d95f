package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
	"github.com/stepwise-run/stepwise/store/internal/sqlrow"
)

// wtx is the writer's view of the current batch transaction. Its methods
// run on the writer goroutine only, with the background context: a request
// is checked for cancellation before it starts, never interrupted inside.
type wtx struct {
	st    *stmts
	c     *sql.Conn
	cache *rowCache
	fold  *foldState // the writer's, nil outside it
}

// conn is the writer connection, for statements that are not prepared.
func (tx *wtx) conn() *sql.Conn { return tx.c }

var bg = context.Background()

// session returns a copy of a session row, from the cache when it can.
func (tx *wtx) session(id string) (*steptype.Session, error) {
	if s := tx.cache.session(id); s != nil {
		return s, nil
	}
	s, err := scanSession(tx.st.sessionGet.QueryRowContext(bg, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, rules.NotFound("session", id)
	}
	if err != nil {
		return nil, err
	}
	tx.cache.putSession(s)
	return s, nil
}

func (tx *wtx) insertSession(s *steptype.Session) error {
	_, err := tx.st.sessionInsert.ExecContext(bg, sessionArgs(s)...)
	if err != nil {
		if isUnique(err) {
			return rules.Conflict("session %q already exists", s.ID)
		}
		return err
	}
	tx.cache.putSession(s)
	return nil
}

// saveTotals writes the columns StepAppend and StepTruncate change. It
// keeps s as the cached row: the caller must not change it afterwards.
func (tx *wtx) saveTotals(s *steptype.Session) error {
	stmt := tx.st.sessionAppendActive
	if old := tx.cache.peekSession(s.ID); old != nil && nanos(old.UpdatedAt)/1e9 == nanos(s.UpdatedAt)/1e9 {
		stmt = tx.st.sessionAppend // the same second: activity stands
	}
	_, err := stmt.ExecContext(bg, s.LastSequence, s.InputTokens, s.OutputTokens, s.Cost, nanos(s.UpdatedAt), s.ID)
	if err != nil {
		return err
	}
	tx.cache.keepSession(s) // the callers' own copy, unused after
	return nil
}

func (tx *wtx) forks(id string) ([]int64, error) {
	rows, err := tx.st.sessionForks.QueryContext(bg, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var seqs []int64
	for rows.Next() {
		var k int64
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		seqs = append(seqs, k)
	}
	return seqs, rows.Err()
}

// run returns a copy of a run row, from the cache when it can.
func (tx *wtx) run(id string) (*steptype.Run, error) {
	if r := tx.cache.run(id); r != nil {
		return r, nil
	}
	r, err := sqlrow.ScanRun(tx.st.runGet.QueryRowContext(bg, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, rules.NotFound("run", id)
	}
	if err != nil {
		return nil, err
	}
	tx.cache.putRun(r)
	return r, nil
}

// saveRun writes the mutable columns of r, which was read by tx.run as
// old. When none of the indexed columns (status, lease) changed it uses a
// statement that leaves the indexes alone: fewer pages per commit.
func (tx *wtx) saveRun(old, r *steptype.Run) error { return tx.saveRunAs(old, r, false) }

// saveRunAs is saveRun; keep says that the caller hands r over (the
// cache keeps r itself instead of a copy).
func (tx *wtx) saveRunAs(old, r *steptype.Run, keep bool) error {
	errb, err := runErrorJSON(r.Error)
	if err != nil {
		return err
	}
	if old != nil && old.Status == r.Status && old.LeaseOwner == r.LeaseOwner && old.LeaseExpires.Equal(r.LeaseExpires) {
		_, err = tx.st.runUpdateLight.ExecContext(bg, r.Cursor, blob(r.State), r.Output, errb, r.StepCount,
			blob(r.Options), nanos(r.UpdatedAt), nanos(r.FinishedAt), r.ID)
	} else {
		_, err = tx.st.runUpdate.ExecContext(bg, string(r.Status), r.Cursor, blob(r.State), r.Output, errb, r.StepCount,
			blob(r.Options), r.LeaseOwner, nanos(r.LeaseExpires), nanos(r.UpdatedAt), nanos(r.FinishedAt), r.ID)
	}
	if isBusyIndex(err) {
		return rules.SessionBusy(r.SessionID)
	}
	if err != nil {
		return err
	}
	if keep {
		tx.cache.keepRun(r)
	} else {
		tx.cache.putRun(r)
	}
	if old != nil && rules.Finishing(old, r) {
		return tx.closeWaiting(r)
	}
	return nil
}

func (tx *wtx) insertRun(r *steptype.Run) error {
	args, err := runArgs(r)
	if err != nil {
		return err
	}
	if _, err := tx.st.runInsert.ExecContext(bg, args...); err != nil {
		if isBusyIndex(err) {
			return rules.SessionBusy(r.SessionID)
		}
		if isUnique(err) {
			return rules.Conflict("run %q already exists", r.ID)
		}
		return err
	}
	tx.cache.putRun(r)
	return nil
}

// updateRun applies one run update with its fences.
func (tx *wtx) updateRun(p *store.RunUpdateParams) (*steptype.Run, error) {
	old, err := tx.run(p.ID)
	if err != nil {
		return nil, err
	}
	r := rules.CloneRun(old)
	return r, tx.applyRun(old, r, p, false)
}

// advanceRun is updateRun for a caller that does not use the updated row
// (StepAppend): the cached row is read in place and its update, a shallow
// copy (rules.UpdateRun replaces a run's JSON and error, never changes them
// in place), becomes the cached row. Two deep copies fewer per step.
func (tx *wtx) advanceRun(p *store.RunUpdateParams) error {
	old := tx.cache.peekRun(p.ID)
	if old == nil {
		_, err := tx.updateRun(p)
		return err
	}
	r := *old
	return tx.applyRun(old, &r, p, true)
}

// applyRun applies p to r, a copy of old, and saves it.
func (tx *wtx) applyRun(old, r *steptype.Run, p *store.RunUpdateParams, keep bool) error {
	var err error
	var now time.Time
	if p.LeaseFor > 0 {
		if now, err = tx.dbNow(); err != nil {
			return err
		}
	}
	if err := rules.UpdateRun(r, p, now); err != nil {
		return err
	}
	return tx.saveRunAs(old, r, keep)
}

// isUnique reports a unique or primary-key violation.
func isUnique(err error) bool {
	var coded interface{ Code() int }
	if !errors.As(err, &coded) {
		return false
	}
	c := coded.Code()
	return c == codeConstraintUnique || c == codeConstraintPrimaryKey
}
