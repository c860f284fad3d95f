package executor

import (
	"context"
	"fmt"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// MaxLoadAttempts is how many times a claimed run whose context cannot be
// loaded is tried (by any instance) before it fails with the reason.
const MaxLoadAttempts = 5

// CodeLoadFailed is the error code of a run whose load failed.
const CodeLoadFailed = "load_failed"

// ClaimOne leases one run to this process (now: zero for the database's
// clock; agents: when set, only a run of one of them); nil when the run is
// not claimable.
func (s *Service) ClaimOne(ctx context.Context, runID string, now time.Time, agents []string) (*steptype.Run, error) {
	s.Leases.Set(runID, time.Now())
	claimed, err := s.cfg.Store.RunClaim(ctx, &store.RunClaimParams{Owner: s.cfg.Owner, Lease: s.cfg.Lease, ID: runID, Limit: 1, Now: now, Agents: agents})
	if err != nil || len(claimed) == 0 {
		s.Leases.Drop(runID)
	}
	if err != nil {
		// The claim may have been written before the failure (a context
		// cancelled mid-call): hand it back if it is ours.
		s.Requeue([]*steptype.Run{{ID: runID}})
		return nil, fmt.Errorf("claim run: %w", err)
	}
	if len(claimed) == 0 {
		return nil, nil
	}
	return claimed[0], nil
}

// LoadFailed records a failed load of a claimed run. The run keeps its
// lease for a backoff (so no instance retries it at once), then any
// instance may claim it again; after MaxLoadAttempts the run fails with
// the reason. The attempt count is stored with the run (its error), so it
// is bounded across instances and restarts.
func (s *Service) LoadFailed(ctx context.Context, r *steptype.Run, err error) {
	attempt := 1
	if r.Error != nil && r.Error.Code == CodeLoadFailed {
		attempt = r.Error.Attempt + 1
	}
	serr := &steptype.StepError{Message: fmt.Sprintf("load run: %v", err), Class: steptype.ErrorTransient, Attempt: attempt, Code: CodeLoadFailed}
	s.cfg.Logger.Error("stepwise: load run", "run", r.ID, "attempt", attempt, "of", MaxLoadAttempts, "err", err)
	p := &store.RunUpdateParams{ID: r.ID, Owner: s.cfg.Owner, ExpectStatus: []steptype.RunStatus{steptype.RunRunning}, Error: serr, Now: s.cfg.Now()}
	if attempt >= MaxLoadAttempts {
		failed := steptype.RunFailed
		serr.Class = steptype.ErrorPermanent
		p.Status, p.ClearLease = &failed, true
	} else {
		p.LeaseFor = loadBackoff(attempt, s.cfg.Lease)
	}
	if _, uerr := s.cfg.Store.RunUpdate(context.WithoutCancel(ctx), p); uerr != nil {
		s.cfg.Logger.Error("stepwise: record load failure", "run", r.ID, "err", uerr)
	}
}

// loadBackoff is how long a run whose load failed stays leased before the
// next attempt: doubling from 100ms, at most the lease length.
func loadBackoff(attempt int, lease time.Duration) time.Duration {
	return min(100*time.Millisecond<<min(attempt-1, 20), lease)
}
