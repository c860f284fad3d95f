package stepwise

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// MaxLoadAttempts is how many times a claimed run whose context cannot be
// loaded is tried (by any instance) before it fails with the reason.
const MaxLoadAttempts = 5

// codeLoadFailed is the error code of a run whose load failed.
const codeLoadFailed = "load_failed"

// agentNames lists the registered agents: an instance claims only runs it
// can execute, so a run of an agent it does not know waits for an instance
// that does (rolling deploys).
func (e *Engine) agentNames() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	names := make([]string, 0, len(e.agents))
	for n := range e.agents {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// loadFailed records a failed load of a claimed run. The run keeps its
// lease for a backoff (so no instance retries it at once), then any
// instance may claim it again; after MaxLoadAttempts the run fails with
// the reason. The attempt count is stored with the run (its error), so it
// is bounded across instances and restarts.
func (e *Engine) loadFailed(ctx context.Context, r *Run, err error) {
	attempt := 1
	if r.Error != nil && r.Error.Code == codeLoadFailed {
		attempt = r.Error.Attempt + 1
	}
	serr := &StepError{Message: fmt.Sprintf("load run: %v", err), Class: steptype.ErrorTransient, Attempt: attempt, Code: codeLoadFailed}
	e.cfg.Logger.Error("stepwise: load run", "run", r.ID, "attempt", attempt, "of", MaxLoadAttempts, "err", err)
	p := &store.RunUpdateParams{ID: r.ID, Owner: e.cfg.Owner, ExpectStatus: []steptype.RunStatus{steptype.RunRunning}, Error: serr, Now: e.now()}
	if attempt >= MaxLoadAttempts {
		failed := steptype.RunFailed
		serr.Class = steptype.ErrorPermanent
		p.Status, p.ClearLease = &failed, true
	} else {
		p.LeaseFor = loadBackoff(attempt, e.cfg.Lease)
	}
	if _, uerr := e.store.RunUpdate(context.WithoutCancel(ctx), p); uerr != nil {
		e.cfg.Logger.Error("stepwise: record load failure", "run", r.ID, "err", uerr)
	}
}

// loadBackoff is how long a run whose load failed stays leased before the
// next attempt: doubling from 100ms, at most the lease length.
func loadBackoff(attempt int, lease time.Duration) time.Duration {
	return min(100*time.Millisecond<<min(attempt-1, 20), lease)
}
