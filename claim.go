package stepwise

import (
	"context"
	"fmt"

	"github.com/stepwise-run/stepwise/internal/runexec"

	"github.com/stepwise-run/stepwise/internal/executor"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// claim leases a run to this engine and prepares its execution.
func (e *Engine) claim(ctx context.Context, runID string, parent *execution, owned bool) (*execution, error) {
	if err := e.claimable(runID); err != nil {
		return nil, err
	}
	var a *Agent
	run, err := e.exec.Lease(ctx, runID, owned, func(r *Run) (err error) {
		a, err = e.Agent(r.Agent)
		return err
	})
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
	if err := e.activate(x); err != nil {
		x.Abandon() // not ours to hand back: the other execution owns it
		return nil, err
	}
	e.exec.StartHeartbeat()
	return x, nil
}

// claimable refuses a claim by a closed engine, or of a run that executes
// in this process already.
func (e *Engine) claimable(runID string) error {
	e.mu.Lock()
	closed := e.closed || e.exec.Stopping()
	_, busy := e.active[runID]
	e.mu.Unlock()
	if closed {
		return ErrEngineClosed
	}
	if busy {
		return fmt.Errorf("%w: run %s is already executing in this process", ErrConflict, runID)
	}
	return nil
}

// activate registers a loaded execution as the one of its run in this
// process and acquires its session's topic, unless the background
// executor registered it meanwhile (it claimed the run first and owns the
// execution).
func (e *Engine) activate(x *execution) error {
	x.done = make(chan struct{})
	e.mu.Lock()
	if _, busy := e.active[x.Run.ID]; busy {
		e.mu.Unlock()
		return fmt.Errorf("%w: run %s is already executing in this process", ErrConflict, x.Run.ID)
	}
	e.active[x.Run.ID] = x
	e.mu.Unlock()
	x.Topic = e.broker.Acquire(x.Run.SessionID, x.LastSeq)
	return nil
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
	x.unregister()
	x.e.broker.Release(x.Run.SessionID)
}

// unregister ends x's registration as its run's execution in this process.
func (x *execution) unregister() {
	x.e.mu.Lock()
	if x.e.active[x.Run.ID] == x {
		delete(x.e.active, x.Run.ID)
		x.e.exec.Leases.Drop(x.Run.ID)
	}
	x.e.mu.Unlock()
	if x.done != nil {
		close(x.done)
	}
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
	// A stopped execution of this run here may still commit (the same
	// owner): the load comes after it let go, so it reads what it did.
	if !e.await(x) {
		x.Cancel(nil)
		return
	}
	if err := x.load(ctx); err != nil {
		x.Cancel(nil)
		e.exec.LoadFailed(ctx, r, err)
		x.unregister()
		return
	}
	if r.Error != nil && r.Error.Code == executor.CodeLoadFailed {
		// Loaded at last: the earlier attempts' error no longer applies.
		_, _ = e.store.RunUpdate(ctx, &store.RunUpdateParams{ID: r.ID, Owner: e.cfg.Owner, ExpectStatus: []steptype.RunStatus{steptype.RunRunning}, ClearError: true, Now: e.now()})
		r.Error = nil
	}
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

// await waits until no other execution of x's run is active in this
// process and registers x as its execution; false when the engine closed.
func (e *Engine) await(x *execution) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		if e.closed {
			return false
		}
		prev, busy := e.active[x.Run.ID]
		if !busy {
			break
		}
		e.mu.Unlock()
		<-prev.done
		e.mu.Lock()
	}
	x.done = make(chan struct{})
	e.active[x.Run.ID] = x
	return true
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
