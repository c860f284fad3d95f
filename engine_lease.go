package stepwise

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/stepwise-run/stepwise/store"
)

// ErrLeaseStalled stops the executions of an instance whose leases could
// not be renewed (the database is unreachable or stalled) before they can
// lapse: another instance may take the runs over, and two executions of one
// run must not overlap.
var ErrLeaseStalled = errors.New("stepwise: lease renewal stalled; execution stopped before its lease could lapse")

// leaseClock records, per run leased by this engine, when (on this
// process's monotonic clock) the request that last set its lease was sent.
// The lease runs from the database's clock at some instant after that, so
// it lasts at least until that time plus the lease length, whatever the
// skew between this process's clock and the database's.
type leaseClock struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (l *leaseClock) set(id string, t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.at == nil {
		l.at = map[string]time.Time{}
	}
	l.at[id] = t
}

func (l *leaseClock) get(id string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.at[id]
	return t, ok
}

func (l *leaseClock) drop(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.at, id)
}

// liveOwners are the lease owners of the engines of this process that are
// not closed. On an exclusive store a lease of any other owner belongs to a
// process that died.
var liveOwners = struct {
	sync.Mutex
	n map[string]int
}{n: map[string]int{}}

func registerOwner(o string) {
	liveOwners.Lock()
	defer liveOwners.Unlock()
	liveOwners.n[o]++
}

func unregisterOwner(o string) {
	liveOwners.Lock()
	defer liveOwners.Unlock()
	if liveOwners.n[o]--; liveOwners.n[o] <= 0 {
		delete(liveOwners.n, o)
	}
}

func ownerAlive(o string) bool {
	liveOwners.Lock()
	defer liveOwners.Unlock()
	return liveOwners.n[o] > 0
}

// startHeartbeat starts the lease heartbeat once. Every Lease/6 it checks
// the leases of the executions of this process, and renews them all in one
// store call (RunLeaseRenew, on the database's clock) unless a renewal is
// still in flight; each renewal has Lease/3 to answer.
func (e *Engine) startHeartbeat() {
	e.bg.once.Do(func() {
		e.wakeChan()
		e.mu.Lock()
		if e.bg.stopping {
			e.mu.Unlock()
			return
		}
		stop := e.bg.stop
		e.bg.done.Add(1)
		e.mu.Unlock()
		go func() {
			defer e.bg.done.Done()
			t := time.NewTicker(max(e.cfg.Lease/6, time.Millisecond))
			defer t.Stop()
			inflight := make(chan struct{}, 1)
			var renewing sync.WaitGroup
			defer renewing.Wait()
			last := time.Now()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				e.stopStalled()
				if time.Since(last) < e.cfg.Lease/3 {
					continue
				}
				select {
				case inflight <- struct{}{}:
				default:
					continue // the previous renewal has not answered yet
				}
				last = time.Now()
				renewing.Add(1)
				go func() {
					defer renewing.Done()
					defer func() { <-inflight }()
					e.heartbeat()
				}()
			}
		}()
	})
}

// activeExecutions returns the executions of this process.
func (e *Engine) activeExecutions() []*execution {
	e.mu.Lock()
	defer e.mu.Unlock()
	xs := make([]*execution, 0, len(e.active))
	for _, x := range e.active {
		xs = append(xs, x)
	}
	return xs
}

// heartbeat renews the leases of every run executing in this process, in
// one statement. A run whose lease was not renewed (cancelled, or taken
// over after its lease lapsed) stops.
func (e *Engine) heartbeat() {
	xs := e.activeExecutions()
	if len(xs) == 0 {
		return
	}
	ids := make([]string, len(xs))
	for i, x := range xs {
		ids[i] = x.run.ID
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(e.cfg.Lease/3, time.Millisecond))
	defer cancel()
	sent := time.Now()
	renewed, err := e.store.RunLeaseRenew(ctx, &store.RunLeaseRenewParams{Owner: e.cfg.Owner, IDs: ids, Lease: e.cfg.Lease})
	if err != nil {
		e.cfg.Logger.Warn("stepwise: lease renewal failed", "runs", len(ids), "err", err)
		return
	}
	for _, x := range xs {
		if slices.Contains(renewed, x.run.ID) {
			e.leases.set(x.run.ID, sent)
			continue
		}
		x.cancel(x.conflict(store.ErrConflict))
	}
}

// stopStalled stops the executions whose lease has not been renewed for
// two thirds of its length: the database did not answer, and the lease
// must not lapse while this process still executes the run.
func (e *Engine) stopStalled() {
	var stalled []*execution
	for _, x := range e.activeExecutions() {
		at, ok := e.leases.get(x.run.ID)
		if ok && x.ctx.Err() == nil && time.Since(at) >= e.cfg.Lease*2/3 {
			stalled = append(stalled, x)
		}
	}
	if len(stalled) == 0 {
		return
	}
	e.cfg.Logger.Error("stepwise: the database has not renewed this instance's leases; stopping its executions before the leases lapse",
		"executions", len(stalled), "lease", e.cfg.Lease)
	for _, x := range stalled {
		x.cancel(ErrLeaseStalled)
	}
}
