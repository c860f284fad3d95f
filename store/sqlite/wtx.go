package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// wtx is the writer's view of the current batch transaction. Its methods
// run on the writer goroutine only, with the background context: a request
// is checked for cancellation before it starts, never interrupted inside.
type wtx struct {
	st *stmts
	c  *sql.Conn
}

// conn is the writer connection, for statements that are not prepared.
func (tx *wtx) conn() *sql.Conn { return tx.c }

var bg = context.Background()

func (tx *wtx) session(id string) (*steptype.Session, error) {
	s, err := scanSession(tx.st.sessionGet.QueryRowContext(bg, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, rules.NotFound("session", id)
	}
	return s, err
}

func (tx *wtx) insertSession(s *steptype.Session) error {
	_, err := tx.st.sessionInsert.ExecContext(bg, sessionArgs(s)...)
	if err != nil && isUnique(err) {
		return rules.Conflict("session %q already exists", s.ID)
	}
	return err
}

// saveTotals writes the columns StepAppend and StepTruncate change.
func (tx *wtx) saveTotals(s *steptype.Session) error {
	_, err := tx.st.sessionAppend.ExecContext(bg, s.LastSequence, s.InputTokens, s.OutputTokens, s.Cost, nanos(s.UpdatedAt), s.ID)
	return err
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

func (tx *wtx) run(id string) (*steptype.Run, error) {
	r, err := scanRun(tx.st.runGet.QueryRowContext(bg, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, rules.NotFound("run", id)
	}
	return r, err
}

func (tx *wtx) saveRun(r *steptype.Run) error {
	args, err := runUpdateArgs(r)
	if err != nil {
		return err
	}
	_, err = tx.st.runUpdate.ExecContext(bg, args...)
	return err
}

// updateRun applies one run update with its fences.
func (tx *wtx) updateRun(p *store.RunUpdateParams) (*steptype.Run, error) {
	r, err := tx.run(p.ID)
	if err != nil {
		return nil, err
	}
	if err := rules.UpdateRun(r, p); err != nil {
		return nil, err
	}
	return r, tx.saveRun(r)
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
