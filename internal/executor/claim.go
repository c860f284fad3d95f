package executor

import (
	"context"
	"fmt"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
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

// Lease leases a run to this process for an execution of its own (owned:
// the caller holds the lease already) and returns it. check refuses a run
// the engine cannot execute (an agent it does not know): a run claimed
// before the check is handed back.
//
// On a store shared with other processes the claim comes first (it reads
// the run); the run is read on its own only to explain a refusal: an
// execution costs one read fewer. An exclusive store's run is read first,
// for the takeover of a dead process's lease.
func (s *Service) Lease(ctx context.Context, runID string, owned bool, check func(*steptype.Run) error) (*steptype.Run, error) {
	shared := !owned && !s.cfg.Store.Exclusive()
	var run *steptype.Run
	if shared {
		var err error
		if run, err = s.ClaimOne(ctx, runID, time.Time{}, s.cfg.Agents()); err != nil {
			return nil, err
		}
	}
	r := run
	if r == nil {
		var err error
		if r, err = s.claimable(ctx, runID); err != nil {
			return nil, err
		}
	}
	if err := check(r); err != nil {
		if run != nil { // claimed, and the agent went away meanwhile
			s.Leases.Drop(runID)
			s.Requeue([]*steptype.Run{run})
		}
		return nil, err
	}
	switch {
	case owned:
		return r, nil
	case shared && run == nil:
		return nil, fmt.Errorf("%w: run %s is leased by another owner", store.ErrConflict, runID)
	case !shared:
		var err error
		if run, err = s.ClaimOne(ctx, runID, s.takeoverTime(r), nil); err != nil {
			return nil, err
		}
		if run == nil {
			return nil, fmt.Errorf("%w: run %s is leased by another owner", store.ErrConflict, runID)
		}
	}
	return run, nil
}

// claimable reads a run to claim, refusing one that finished or waits for
// input.
func (s *Service) claimable(ctx context.Context, runID string) (*steptype.Run, error) {
	r, err := s.cfg.Store.RunGet(ctx, &store.RunGetParams{ID: runID})
	if err != nil {
		return nil, fmt.Errorf("run %q: %w", runID, err)
	}
	switch {
	case r.Status.Terminal():
		return nil, fmt.Errorf("%w: run %s is %s", wire.ErrRunFinished, runID, r.Status)
	case r.Status == steptype.RunWaiting:
		return nil, fmt.Errorf("%w: run %s is waiting for input; answer its pending requests first", store.ErrConflict, runID)
	}
	return r, nil
}

// takeoverTime is the time a claim of r on an exclusive store is made at:
// zero (the database's clock), or just after the lease of a process that
// died.
func (s *Service) takeoverTime(r *steptype.Run) time.Time {
	var now time.Time // zero: the database's clock
	if r.LeaseOwner != "" && r.LeaseOwner != s.cfg.Owner && !OwnerAlive(r.LeaseOwner) {
		// The store is exclusive to this process and no engine of this
		// process holds the lease, so its owner is a process that died:
		// take the lease over at once. A lease held by another engine of
		// this process is never taken.
		if now = r.LeaseExpires.Add(time.Millisecond); now.Before(time.Now()) {
			now = time.Now()
		}
	}
	return now
}
