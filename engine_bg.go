package stepwise

import (
	"context"
	"errors"
	"time"

	"github.com/stepwise-run/stepwise/internal/executor"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// ErrLeaseStalled stops the executions of an instance whose leases could
// not be renewed (the database is unreachable or stalled) before they can
// lapse: another instance may take the runs over, and two executions of one
// run must not overlap.
var ErrLeaseStalled = executor.ErrLeaseStalled

// MaxLoadAttempts is how many times a claimed run whose context cannot be
// loaded is tried (by any instance) before it fails with the reason.
const MaxLoadAttempts = executor.MaxLoadAttempts

// newExecutor returns the engine's background executor.
func (e *Engine) newExecutor() *executor.Service {
	return executor.New(executor.Config{
		Store: e.store, Broker: e.broker, Owner: e.cfg.Owner, Lease: e.cfg.Lease, Workers: e.cfg.Workers,
		PollInterval: e.cfg.PollInterval, Logger: e.cfg.Logger, Now: e.now,
		Agents: e.agentNames, Execute: e.executeClaimed, Lessees: e.lessees, StopExecutions: e.stopExecutions,
		Reconcile: e.reconcileWaiting, Sweep: e.expireInputs,
	})
}

// wake nudges the background executor to look for runnable runs. Other
// instances sharing the database are woken by the store, whose
// notification commits with the change that made a run runnable.
func (e *Engine) wake() { e.exec.Wake() }

// Start runs the background executor (calling it again is a no-op): it claims queued runs (and runs whose
// lease expired) and executes them, until Stop. Runs started with StartRun,
// and runs whose input was answered, are picked up here.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return ErrEngineClosed
	}
	if err := e.exec.Start(ctx); errors.Is(err, executor.ErrStopping) {
		return ErrEngineClosed
	}
	return nil
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
	x := &execution{e: e, agent: a, run: r}
	x.ctx, x.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	if err := x.load(ctx); err != nil {
		x.cancel(nil)
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
	x.topic = e.broker.Acquire(r.SessionID, x.lastSeq)
	go func() {
		select {
		case <-e.exec.Stopped():
			x.cancel(errShutdown)
		case <-x.ctx.Done():
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
	r := x.runSnapshot()
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
			x.cancel(errShutdown)
		}
	}
}

// LeasedRun is the ID of the run the execution holds the lease of.
func (x *execution) LeasedRun() string { return x.run.ID }

// Running reports whether the execution has not been stopped.
func (x *execution) Running() bool { return x.ctx.Err() == nil }

// Stop stops the execution with cause.
func (x *execution) Stop(cause error) { x.cancel(cause) }

// LeaseRefused stops the execution whose lease renewal the store refused.
func (x *execution) LeaseRefused() { x.cancel(x.conflict(store.ErrConflict)) }

// Stop stops background work and waits for executing runs to reach a step
// boundary; they are handed back to the queue (status queued), so another
// process, or the next start, resumes them. In-flight steps are abandoned,
// never half-written.
func (e *Engine) Stop(ctx context.Context) error { return e.exec.Stop(ctx) }

// Close stops the engine (see Stop). It does not close the store.
func (e *Engine) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := e.Stop(ctx)
	e.mu.Lock()
	wasClosed := e.closed
	e.closed = true
	e.mu.Unlock()
	if !wasClosed {
		executor.UnregisterOwner(e.cfg.Owner)
	}
	e.stopObservers()
	return err
}
