package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/internal/rules"
)

// StepResolve implements store.Store. The step row is locked, then (with
// QueueRun) its run's row, so that resolutions of one run's steps queue:
// the last of them sees no step waiting and requeues the run. The update
// itself is conditional on the step still waiting, so of concurrent
// resolutions, in any number of processes, exactly one wins and the others
// get store.ErrConflict.
func (s *Store) StepResolve(ctx context.Context, p *store.StepResolveParams) (*steptype.Step, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := rules.CheckResolve(p); err != nil {
		return nil, err
	}
	body, err := inTx(s, ctx, func(tx *wtx) ([]byte, error) {
		var body []byte
		var runID string
		err := tx.QueryRow(ctx, `SELECT body, run_id FROM steps WHERE id = $1 FOR NO KEY UPDATE`, p.ID).Scan(&body, &runID)
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
		if body, err = rules.EncodeStep(st); err != nil {
			return nil, err
		}
		var run *steptype.Run
		if p.QueueRun && runID != "" {
			run, err = scanRun(tx.QueryRow(ctx, `SELECT `+runCols+` FROM runs WHERE id = $1 FOR NO KEY UPDATE`, runID))
			if errors.Is(err, pgx.ErrNoRows) {
				run, err = nil, nil // a step of a run that is gone: nothing to requeue
			}
			if err != nil {
				return nil, err
			}
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
		args, err := runUpdateArgs(run)
		if err != nil {
			return nil, err
		}
		_, err = tx.Exec(ctx, runUpdateSQL, args...)
		return body, err
	})
	if err != nil {
		return nil, err
	}
	return rules.DecodeStep(body)
}
