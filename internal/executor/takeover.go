package executor

import (
	"context"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// staleSweepShared is how often a service on a shared store looks for runs
// leased to its own owner that it no longer executes; on an exclusive
// store it looks at every poll.
const staleSweepShared = 30 * time.Second

// takeOver hands back to the queue, so that the next claim executes them
// at once, the running runs whose lease can only be stale:
//
//   - on an exclusive store, those leased to an owner that is no engine of
//     this process: the process that held the file before died (a
//     SIGKILL), since the opener owns the file. A lease that runs out more
//     than 30 days from now was granted by no engine (the OTLP and
//     LangSmith ingester holds its runs so while their trace is open) and
//     is left;
//   - on any store, those leased to this service's own owner that none of
//     its executions holds, seen so in two sweeps in a row (an execution
//     stopped by a store error; the second look leaves a run that is being
//     claimed or created leased to this owner alone). A run whose load
//     failed keeps its lease for the backoff (LoadFailed) and is left.
//
// Each hand-back is fenced by the stale owner and the running status.
// prev is the previous sweep's own stale runs; it returns this sweep's.
func (s *Service) takeOver(ctx context.Context, prev map[string]bool) map[string]bool {
	runs, err := s.cfg.Store.RunList(ctx, &store.RunListParams{Statuses: []steptype.RunStatus{steptype.RunRunning}})
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("stepwise: look for stale leases", "err", err)
		}
		return prev
	}
	held := map[string]bool{}
	for _, l := range s.cfg.Lessees() {
		held[l.LeasedRun()] = true
	}
	exclusive := s.cfg.Store.Exclusive()
	own := map[string]bool{}
	for _, r := range runs {
		var why string
		switch {
		case r.LeaseOwner == "":
		case r.LeaseOwner == s.cfg.Owner:
			_, leasing := s.Leases.Get(r.ID)
			if held[r.ID] || leasing || (r.Error != nil && r.Error.Code == CodeLoadFailed) {
				continue
			}
			if own[r.ID] = true; prev[r.ID] {
				why = "no execution of this engine holds it"
			}
		case exclusive && !OwnerAlive(r.LeaseOwner) && !r.LeaseExpires.After(s.cfg.Now().Add(30*24*time.Hour)):
			why = "its owner is not alive and the store is this process's alone"
		}
		if why == "" {
			continue
		}
		queued := steptype.RunQueued
		_, err := s.cfg.Store.RunUpdate(ctx, &store.RunUpdateParams{ID: r.ID, Owner: r.LeaseOwner, ExpectStatus: []steptype.RunStatus{steptype.RunRunning},
			Status: &queued, ClearLease: true, Now: s.cfg.Now()})
		if err == nil {
			s.cfg.Logger.Info("stepwise: took over a stale lease", "run", r.ID, "owner", r.LeaseOwner, "why", why)
			s.Wake()
		}
	}
	return own
}
