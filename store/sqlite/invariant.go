package sqlite

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
	"github.com/stepwise-run/stepwise/store/internal/sqlrow"
)

// dbNowSQL is the database clock in unix nanoseconds (millisecond
// resolution): leases are measured by the database, not by each caller.
const dbNowSQL = `CAST(unixepoch('subsec') * 1000 AS INTEGER) * 1000000`

// Notifier returns nil: a SQLite file has one writer process, whose engine
// sees every change it makes.
func (s *Store) Notifier() store.Notifier { return nil }

// dbNow reads the database clock.
func (tx *wtx) dbNow() (time.Time, error) {
	var n int64
	if err := tx.conn().QueryRowContext(bg, `SELECT `+dbNowSQL).Scan(&n); err != nil {
		return time.Time{}, err
	}
	return fromNanos(n), nil
}

// isBusyIndex reports a violation of runs_one_unfinished.
func isBusyIndex(err error) bool {
	return err != nil && isUnique(err) && (strings.Contains(err.Error(), "runs.session_id") || strings.Contains(err.Error(), "runs_one_unfinished"))
}

// closeWaiting closes the waiting steps of r, which has just finished.
func (tx *wtx) closeWaiting(r *steptype.Run) error {
	rows, err := tx.conn().QueryContext(bg, `SELECT body FROM steps WHERE run_id = ? AND status = 'waiting'`, r.ID)
	if err != nil {
		return err
	}
	var bodies [][]byte
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			rows.Close()
			return err
		}
		bodies = append(bodies, b)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	for _, b := range bodies {
		st, err := rules.DecodeStep(b)
		if err != nil {
			return err
		}
		rules.CloseWaiting(st, r)
		if b, err = rules.EncodeStep(st); err != nil {
			return err
		}
		if _, err := tx.st.stepResolve.ExecContext(bg, string(st.Status), b, st.ID); err != nil {
			return err
		}
	}
	return nil
}

// unfinishedRun returns an unfinished run of a session, or nil.
func (tx *wtx) unfinishedRun(sessionID string) (*steptype.Run, error) {
	rows, err := tx.conn().QueryContext(bg, `SELECT `+sqlrow.RunCols+` FROM runs
		WHERE session_id = ? AND status IN ('queued', 'running', 'waiting') LIMIT 1`, sessionID)
	if err != nil {
		return nil, err
	}
	runs, err := scanRuns(rows)
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	return runs[0], nil
}

// RunLeaseRenew implements store.Store in one statement, on the database
// clock.
func (s *Store) RunLeaseRenew(ctx context.Context, p *store.RunLeaseRenewParams) ([]string, error) {
	if err := rules.CheckRenew(p); err != nil {
		return nil, err
	}
	if len(p.IDs) == 0 {
		return []string{}, nil
	}
	return write(s, ctx, func(tx *wtx) ([]string, error) {
		args := []any{int64(p.Lease), p.Owner}
		for _, id := range p.IDs {
			args = append(args, id)
		}
		rows, err := tx.conn().QueryContext(bg, `UPDATE runs SET lease_expires = `+dbNowSQL+` + ?
			WHERE lease_owner = ? AND status = 'running' AND id IN (`+strings.TrimSuffix(strings.Repeat("?, ", len(p.IDs)), ", ")+`)
			RETURNING id`, args...)
		if err != nil {
			return nil, err
		}
		out := []string{}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, err
			}
			out = append(out, id)
			tx.cache.dropRun(id)
		}
		return out, errors.Join(rows.Err(), rows.Close())
	})
}

// dropRun evicts a run changed by a statement that bypassed the cache.
func (c *rowCache) dropRun(id string) { delete(c.runs, id) }

// StepExpiring implements store.Store from the steps_expiry index.
func (s *Store) StepExpiring(ctx context.Context, p *store.StepExpiringParams) ([]*steptype.Step, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := rules.CheckExpiring(p); err != nil {
		return nil, err
	}
	q := `SELECT body FROM steps WHERE status = 'waiting' AND expires_at > 0 AND expires_at <= ? ORDER BY expires_at, id`
	args := []any{nanos(p.Before)}
	if p.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, p.Limit)
	}
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	bodies, err := collect(rows, nil)
	if err != nil {
		return nil, mapErr(err)
	}
	return decodeBodies(bodies)
}
