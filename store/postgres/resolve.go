package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
	"github.com/stepwise-run/stepwise/store/internal/sqlrow"
)

// StepResolve implements store.Store. The step's run row is locked first,
// then the step's (the order every writer of a run's steps follows, so a
// resolution and a cancel queue instead of deadlocking): resolutions of one
// run's steps queue, and the last of them sees no step waiting and
// requeues the run; a run that finished meanwhile (a cancel closed its
// requests) makes the resolution fail. The update itself is conditional on
// the step still waiting, so of concurrent resolutions, in any number of
// processes, exactly one wins and the others get store.ErrConflict.
func (s *Store) StepResolve(ctx context.Context, p *store.StepResolveParams) (*steptype.Step, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := rules.CheckResolve(p); err != nil {
		return nil, err
	}
	ch := s.changesChannel()
	body, err := inTx(s, ctx, func(tx *wtx) ([]byte, error) {
		var runID string
		err := tx.QueryRow(ctx, `SELECT run_id FROM steps WHERE id = $1`, p.ID).Scan(&runID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, rules.NotFound("step", p.ID)
		}
		if err != nil {
			return nil, err
		}
		var run *steptype.Run
		if runID != "" {
			run, err = sqlrow.ScanRun(tx.QueryRow(ctx, `SELECT `+sqlrow.RunCols+` FROM runs WHERE id = $1 FOR NO KEY UPDATE`, runID))
			if errors.Is(err, pgx.ErrNoRows) {
				run, err = nil, nil // a step of a run that is gone: nothing to requeue
			}
			if err != nil {
				return nil, err
			}
		}
		var body []byte
		err = tx.QueryRow(ctx, `SELECT body FROM steps WHERE id = $1 FOR NO KEY UPDATE`, p.ID).Scan(&body)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, rules.NotFound("step", p.ID)
		}
		if err != nil {
			return nil, err
		}
		st, err := rules.DecodeStep(body)
		if err != nil {
			return nil, err
		}
		if err := rules.Resolve(st, p); err != nil {
			return nil, err
		}
		if run != nil && run.Status.Terminal() {
			return nil, rules.Conflict("run %q of step %q is %s", run.ID, st.ID, run.Status)
		}
		if body, err = rules.EncodeStep(st); err != nil {
			return nil, err
		}
		tag, err := tx.Exec(ctx, `UPDATE steps SET status = $1, body = $2 WHERE id = $3 AND status = 'waiting'`,
			string(st.Status), body, st.ID)
		if err != nil {
			return nil, err
		}
		if tag.RowsAffected() != 1 {
			return nil, rules.Conflict("step %q is no longer waiting", st.ID)
		}
		if run == nil {
			return body, nil
		}
		old := rules.CloneRun(run)
		switch {
		case p.FailRun != nil:
			if !rules.FailWaiting(run, p.FailRun, rules.Now(p.Now)) {
				return body, nil
			}
		case p.QueueRun:
			// Under the run's lock: every other resolution of this run has
			// committed or waits behind us.
			var waiting bool
			err = tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM steps WHERE run_id = $1 AND status = 'waiting')`, runID).Scan(&waiting)
			if err != nil || waiting {
				return body, err
			}
			if !rules.Requeue(run, rules.Now(p.Now)) {
				return body, nil
			}
		default:
			return body, nil
		}
		args, err := runUpdateArgs(run)
		if err != nil {
			return nil, err
		}
		b := &pgx.Batch{}
		b.Queue(runUpdateSQL, args...)
		if rules.Finishing(old, run) {
			var waiting []waitingStep
			rows, err := tx.Query(ctx, `SELECT run_id, body FROM steps WHERE run_id = $1 AND status = 'waiting'`, run.ID)
			if err != nil {
				return nil, err
			}
			err = collectWaiting(rows, &waiting)
			if err == nil {
				err = closeWaiting(b, waiting, run)
			}
			if err != nil {
				return nil, err
			}
		}
		var c changes
		c.run(old.Status, run)
		c.queue(b, ch)
		return body, tx.send(ctx, b, true)
	})
	if err != nil {
		return nil, err
	}
	return rules.DecodeStep(body)
}

func collectWaiting(rows pgx.Rows, dst *[]waitingStep) error {
	defer rows.Close()
	for rows.Next() {
		var w waitingStep
		if err := rows.Scan(&w.runID, &w.body); err != nil {
			return err
		}
		*dst = append(*dst, w)
	}
	return rows.Err()
}
