package stepwise

import (
	"context"
	"fmt"
	"github.com/stepwise-run/stepwise/internal/runexec"
	"time"

	"github.com/stepwise-run/stepwise/internal/executor"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// claim leases a run to this engine and prepares its execution.
func (e *Engine) claim(ctx context.Context, runID string, parent *execution, owned bool) (*execution, error) {
	e.mu.Lock()
	closed := e.closed || e.exec.Stopping()
	_, busy := e.active[runID]
	e.mu.Unlock()
	if closed {
		return nil, ErrEngineClosed
	}
	if busy {
		return nil, fmt.Errorf("%w: run %s is already executing in this process", ErrConflict, runID)
	}
	run, a, err := e.leaseRun(ctx, runID, owned)
	if err != nil {
		return nil, err
	}
	x := e.newExecution(ctx, a, run, parent)
	if err := x.load(ctx); err != nil {
		x.Abandon()
		x.HandBack() // claimed but never started
		e.exec.Leases.Drop(runID)
		return nil, err
	}
	x.done = make(chan struct{})
	e.mu.Lock()
	if _, busy := e.active[runID]; busy {
		// The background executor registered it meanwhile (it claimed the
		// run first and owns the execution).
		e.mu.Unlock()
		x.Abandon() // not ours to hand back: the other execution owns it
		return nil, fmt.Errorf("%w: run %s is already executing in this process", ErrConflict, runID)
	}
	e.active[runID] = x
	e.mu.Unlock()
	x.Topic = e.broker.Acquire(run.SessionID, x.LastSeq)
	e.exec.StartHeartbeat()
	return x, nil
}

// leaseRun leases a run to this engine (owned: the caller holds its lease
// already) and returns it with its agent.
func (e *Engine) leaseRun(ctx context.Context, runID string, owned bool) (*Run, *Agent, error) {
	// On a store shared with other processes the claim comes first (it
	// reads the run); the run is read on its own only to explain a refusal:
	// an execution costs one read fewer. An exclusive store's run is read
	// first, for the takeover of a dead process's lease.
	shared := !owned && !e.store.Exclusive()
	var run *Run
	if shared {
		var err error
		if run, err = e.exec.ClaimOne(ctx, runID, time.Time{}, e.agentNames()); err != nil {
			return nil, nil, err
		}
	}
	r := run
	if r == nil {
		var err error
		if r, err = e.claimableRun(ctx, runID); err != nil {
			return nil, nil, err
		}
	}
	a, err := e.Agent(r.Agent)
	if err != nil {
		if run != nil { // claimed, and the agent went away meanwhile
			e.exec.Leases.Drop(runID)
			e.exec.Requeue([]*Run{run})
		}
		return nil, nil, err
	}
	switch {
	case owned:
		run = r
	case shared && run == nil:
		return nil, nil, fmt.Errorf("%w: run %s is leased by another owner", ErrConflict, runID)
	case !shared:
		if run, err = e.exec.ClaimOne(ctx, runID, e.takeoverTime(r), nil); err != nil {
			return nil, nil, err
		}
		if run == nil {
			return nil, nil, fmt.Errorf("%w: run %s is leased by another owner", ErrConflict, runID)
		}
	}
	return run, a, nil
}

// claimableRun reads a run to claim, refusing one that finished or waits
// for input.
func (e *Engine) claimableRun(ctx context.Context, runID string) (*Run, error) {
	r, err := e.store.RunGet(ctx, &store.RunGetParams{ID: runID})
	if err != nil {
		return nil, fmt.Errorf("run %q: %w", runID, err)
	}
	switch {
	case r.Status.Terminal():
		return nil, fmt.Errorf("%w: run %s is %s", ErrRunFinished, runID, r.Status)
	case r.Status == steptype.RunWaiting:
		return nil, fmt.Errorf("%w: run %s is waiting for input; answer its pending requests first", ErrConflict, runID)
	}
	return r, nil
}

// takeoverTime is the time a claim of r on an exclusive store is made at:
// zero (the database's clock), or just after the lease of a process that
// died.
func (e *Engine) takeoverTime(r *Run) time.Time {
	var now time.Time // zero: the database's clock
	if r.LeaseOwner != "" && r.LeaseOwner != e.cfg.Owner && !executor.OwnerAlive(r.LeaseOwner) {
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

// newExecution returns the execution of a claimed run, with its contexts:
// a child's derives from its parent's; a top-level one's is cancelled
// with a cause of its own when ctx is, and bounded by the run timeout.
func (e *Engine) newExecution(ctx context.Context, a *Agent, run *Run, parent *execution) *execution {
	x := e.newExec(a, run)
	x.parent = parent
	if parent != nil {
		x.Ctx, x.Cancel = context.WithCancelCause(parent.Ctx)
		x.Sink = parent.Sink
	} else {
		// The consumer's cancellation reaches the execution with a cause of
		// its own, so that it hands the run back instead of failing a step.
		x.Ctx, x.Cancel = context.WithCancelCause(context.WithoutCancel(ctx))
		x.Unwatch = context.AfterFunc(ctx, func() { x.Cancel(&runexec.GoneError{Cause: context.Cause(ctx)}) })
	}
	if t := a.Limits.RunTimeout; t > 0 && parent == nil {
		var cancel context.CancelFunc
		x.Ctx, cancel = context.WithTimeoutCause(x.Ctx, t, ErrRunTimeout)
		_ = cancel // released with x.Cancel
	}
	return x
}

// release ends an execution's hold on its run.
func (x *execution) release() {
	x.Abandon()
	x.e.mu.Lock()
	if x.e.active[x.Run.ID] == x {
		delete(x.e.active, x.Run.ID)
		x.e.exec.Leases.Drop(x.Run.ID)
	}
	x.e.mu.Unlock()
	if x.done != nil {
		close(x.done)
	}
	x.e.broker.Release(x.Run.SessionID)
}

// executeClaimed executes a run the background executor has claimed.
func (e *Engine) executeClaimed(ctx context.Context, r *Run) {
	a, err := e.Agent(r.Agent)
	if err != nil {
		// Claims are filtered by the registered agents, so the agent was
		// unregistered meanwhile: hand the run back for an instance that
		// knows it (a rolling deploy), never fail it.
		e.exec.Requeue([]*Run{r})
		e.exec.Leases.Drop(r.ID)
		return
	}
	x := e.newExec(a, r)
	x.Ctx, x.Cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	if err := x.load(ctx); err != nil {
		x.Cancel(nil)
		e.exec.LoadFailed(ctx, r, err)
		e.exec.Leases.Drop(r.ID)
		return
	}
	if r.Error != nil && r.Error.Code == executor.CodeLoadFailed {
		// Loaded at last: the earlier attempts' error no longer applies.
		_, _ = e.store.RunUpdate(ctx, &store.RunUpdateParams{ID: r.ID, Owner: e.cfg.Owner, ExpectStatus: []steptype.RunStatus{steptype.RunRunning}, ClearError: true, Now: e.now()})
		r.Error = nil
	}
	e.mu.Lock()
	for {
		prev, busy := e.active[r.ID]
		if e.closed {
			e.mu.Unlock()
			return
		}
		if !busy {
			break
		}
		// The execution that parked this run has committed its last step
		// but not let go yet: wait for it, then continue with the claim.
		e.mu.Unlock()
		<-prev.done
		e.mu.Lock()
	}
	x.done = make(chan struct{})
	e.active[r.ID] = x
	e.mu.Unlock()
	x.Topic = e.broker.Acquire(r.SessionID, x.LastSeq)
	go func() {
		select {
		case <-e.exec.Stopped():
			x.Cancel(runexec.ErrShutdown)
		case <-x.Ctx.Done():
		}
	}()
	if err := x.loop(); err != nil {
		e.cfg.Logger.Error("stepwise: run stopped", "run", r.ID, "err", err)
	}
	x.release()
	e.afterRun(ctx, x)
}

// afterRun wakes a parent run whose child finished in the background.
func (e *Engine) afterRun(ctx context.Context, x *execution) {
	r := x.RunSnapshot()
	if r.ParentRunID == "" || !r.Status.Terminal() {
		return
	}
	e.exec.WakeParent(ctx, r.ParentRunID)
}

// lessees returns the executions of this process, for the lease
// heartbeat.
func (e *Engine) lessees() []executor.Lessee {
	e.mu.Lock()
	defer e.mu.Unlock()
	xs := make([]executor.Lessee, 0, len(e.active))
	for _, x := range e.active {
		xs = append(xs, x)
	}
	return xs
}

// stopExecutions stops the top-level executions of this process (Stop):
// they hand their runs back at a step boundary.
func (e *Engine) stopExecutions() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, x := range e.active {
		if x.parent == nil {
			x.Cancel(runexec.ErrShutdown)
		}
	}
}
