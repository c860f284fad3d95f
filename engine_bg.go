package stepwise

import (
	"context"
	"sync"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// bgState is the engine's background machinery: the executor of queued
// runs and the lease heartbeat.
type bgState struct {
	once      sync.Once // heartbeat started
	wakeCh    chan struct{}
	stop      chan struct{}
	done      sync.WaitGroup
	running   bool
	stopping  bool // Stop began: no new executions (guarded by Engine.mu)
	stopOnce  sync.Once
	executing sync.WaitGroup
}

func (e *Engine) wakeChan() chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.bg.wakeCh == nil {
		e.bg.wakeCh = make(chan struct{}, 1)
	}
	if e.bg.stop == nil {
		e.bg.stop = make(chan struct{})
	}
	return e.bg.wakeCh
}

// wake nudges the background executor to look for runnable runs. Other
// instances sharing the database are woken by the store, whose
// notification commits with the change that made a run runnable.
func (e *Engine) wake() {
	e.wakeLocal()
}

func (e *Engine) wakeLocal() {
	select {
	case e.wakeChan() <- struct{}{}:
	default:
	}
}

// Start runs the background executor (calling it again is a no-op): it claims queued runs (and runs whose
// lease expired) and executes them, until Stop. Runs started with StartRun,
// and runs whose input was answered, are picked up here.
func (e *Engine) Start(ctx context.Context) error {
	wake := e.wakeChan()
	e.mu.Lock()
	if e.closed || e.bg.stopping {
		e.mu.Unlock()
		return ErrEngineClosed
	}
	if e.bg.running {
		e.mu.Unlock()
		return nil // already started
	}
	e.bg.running = true
	stop := e.bg.stop
	e.bg.done.Add(1)
	e.mu.Unlock()
	e.startHeartbeat()
	lctx, cancelListen := context.WithCancel(context.WithoutCancel(ctx))
	e.listen(lctx)
	go func() {
		defer e.bg.done.Done()
		defer cancelListen()
		sem := make(chan struct{}, e.cfg.Workers)
		e.reconcileWaiting(ctx)
		t := time.NewTicker(e.cfg.PollInterval)
		defer t.Stop()
		var swept time.Time
		for {
			if time.Since(swept) >= orphanSweepEvery {
				e.wakeOrphans(ctx)
				swept = time.Now()
			}
			e.expireInputs(ctx)
			e.dispatch(ctx, sem)
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-wake:
			case <-t.C:
			}
		}
	}()
	return nil
}

// dispatch claims as many runnable runs as there are free workers.
func (e *Engine) dispatch(ctx context.Context, sem chan struct{}) {
	for {
		free := cap(sem) - len(sem)
		if free == 0 {
			return
		}
		sent := time.Now()
		runs, err := e.store.RunClaim(ctx, &store.RunClaimParams{Owner: e.cfg.Owner, Lease: e.cfg.Lease, Limit: free, Agents: e.agentNames()})
		if err != nil {
			if ctx.Err() == nil {
				e.cfg.Logger.Error("stepwise: claim runs", "err", err)
			}
			return
		}
		if len(runs) == 0 {
			return
		}
		for _, r := range runs {
			e.leases.set(r.ID, sent)
		}
		for i, r := range runs {
			sem <- struct{}{}
			e.mu.Lock()
			if e.bg.stopping {
				e.mu.Unlock()
				<-sem
				e.requeue(runs[i:]) // claimed but never started
				return
			}
			e.bg.executing.Add(1)
			e.mu.Unlock()
			go func() {
				defer func() { <-sem; e.bg.executing.Done() }()
				e.executeClaimed(ctx, r)
			}()
		}
	}
}

// executeClaimed executes a run the background executor has claimed.
func (e *Engine) executeClaimed(ctx context.Context, r *Run) {
	a, err := e.Agent(r.Agent)
	if err != nil {
		// Claims are filtered by the registered agents, so the agent was
		// unregistered meanwhile: hand the run back for an instance that
		// knows it (a rolling deploy), never fail it.
		e.requeue([]*Run{r})
		e.leases.drop(r.ID)
		return
	}
	x := &execution{e: e, agent: a, run: r}
	x.ctx, x.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	if err := x.load(ctx); err != nil {
		x.cancel(nil)
		e.loadFailed(ctx, r, err)
		e.leases.drop(r.ID)
		return
	}
	if r.Error != nil && r.Error.Code == codeLoadFailed {
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
	stop := e.bg.stop
	e.mu.Unlock()
	x.topic = e.broker.Acquire(r.SessionID, x.lastSeq)
	go func() {
		select {
		case <-stop:
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
	e.wakeParent(ctx, r.ParentRunID)
}

// wakeParent queues a run waiting for its children once none of its own
// input requests is pending.
func (e *Engine) wakeParent(ctx context.Context, parentID string) {
	waiting, err := e.store.StepList(ctx, &store.StepListParams{RunID: parentID, Status: steptype.StepWaiting, Limit: 1})
	if err != nil || len(waiting) > 0 {
		return
	}
	queued := steptype.RunQueued
	if _, err := e.store.RunUpdate(ctx, &store.RunUpdateParams{ID: parentID, ExpectStatus: []steptype.RunStatus{steptype.RunWaiting}, Status: &queued, ClearLease: true, Now: e.now()}); err == nil {
		e.wake()
	}
}

// Stop stops background work and waits for executing runs to reach a step
// boundary; they are handed back to the queue (status queued), so another
// process, or the next start, resumes them. In-flight steps are abandoned,
// never half-written.
func (e *Engine) Stop(ctx context.Context) error {
	e.wakeChan()
	e.mu.Lock()
	e.bg.stopping = true // from here on nothing adds to bg.done or bg.executing
	e.mu.Unlock()
	e.bg.stopOnce.Do(func() { close(e.bg.stop) })
	e.mu.Lock()
	for _, x := range e.active {
		if x.parent == nil {
			x.cancel(errShutdown)
		}
	}
	e.mu.Unlock()
	done := make(chan struct{})
	// The executor loop first (it may still be handing runs out), then the
	// executions it started.
	go func() { e.bg.done.Wait(); e.bg.executing.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

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
		unregisterOwner(e.cfg.Owner)
	}
	e.stopObservers()
	return err
}

// requeue hands claimed runs back to the queue.
func (e *Engine) requeue(runs []*Run) {
	queued := steptype.RunQueued
	for _, r := range runs {
		_, _ = e.store.RunUpdate(context.Background(), &store.RunUpdateParams{ID: r.ID, Owner: e.cfg.Owner,
			ExpectStatus: []steptype.RunStatus{steptype.RunRunning}, Status: &queued, ClearLease: true, Now: e.now()})
	}
}
