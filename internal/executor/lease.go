package executor

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

// Lessee is an execution of this process that holds the lease of its run.
type Lessee interface {
	// LeasedRun is the ID of the run.
	LeasedRun() string
	// Running reports whether the execution has not been stopped.
	Running() bool
	// Stop stops the execution with cause.
	Stop(cause error)
	// LeaseRefused stops the execution whose lease the store did not
	// renew (it was cancelled, or taken over after its lease lapsed).
	LeaseRefused()
}

// LeaseClock records, per run leased by this process, when (on this
// process's monotonic clock) the request that last set its lease was sent.
// The lease runs from the database's clock at some instant after that, so
// it lasts at least until that time plus the lease length, whatever the
// skew between this process's clock and the database's.
type LeaseClock struct {
	mu sync.Mutex
	at map[string]time.Time
}

// Set records that the request setting the lease of run id was sent at t.
func (l *LeaseClock) Set(id string, t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.at == nil {
		l.at = map[string]time.Time{}
	}
	l.at[id] = t
}

// Get returns what Set recorded for run id.
func (l *LeaseClock) Get(id string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.at[id]
	return t, ok
}

// Drop forgets run id.
func (l *LeaseClock) Drop(id string) {
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

// RegisterOwner counts an engine of this process that leases runs as o.
func RegisterOwner(o string) {
	liveOwners.Lock()
	defer liveOwners.Unlock()
	liveOwners.n[o]++
}

// UnregisterOwner ends a RegisterOwner (the engine closed).
func UnregisterOwner(o string) {
	liveOwners.Lock()
	defer liveOwners.Unlock()
	if liveOwners.n[o]--; liveOwners.n[o] <= 0 {
		delete(liveOwners.n, o)
	}
}

// OwnerAlive reports whether an engine of this process leases runs as o.
func OwnerAlive(o string) bool {
	liveOwners.Lock()
	defer liveOwners.Unlock()
	return liveOwners.n[o] > 0
}

// StartHeartbeat starts the lease heartbeat once (Start starts it too).
// Every Lease/6 it checks the leases of the executions of this process, and
// renews them all in one store call (RunLeaseRenew, on the database's
// clock) unless a renewal is still in flight; each renewal has Lease/3 to
// answer.
func (s *Service) StartHeartbeat() {
	s.once.Do(func() {
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			return
		}
		s.done.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.done.Done()
			t := time.NewTicker(max(s.cfg.Lease/6, time.Millisecond))
			defer t.Stop()
			inflight := make(chan struct{}, 1)
			var renewing sync.WaitGroup
			defer renewing.Wait()
			last := time.Now()
			for {
				select {
				case <-s.stop:
					return
				case <-t.C:
				}
				s.stopStalled()
				if time.Since(last) < s.cfg.Lease/3 {
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
					s.heartbeat()
				}()
			}
		}()
	})
}

// heartbeat renews the leases of every run executing in this process, in
// one statement. A run whose lease was not renewed (cancelled, or taken
// over after its lease lapsed) stops.
func (s *Service) heartbeat() {
	xs := s.cfg.Lessees()
	if len(xs) == 0 {
		return
	}
	ids := make([]string, len(xs))
	for i, x := range xs {
		ids[i] = x.LeasedRun()
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(s.cfg.Lease/3, time.Millisecond))
	defer cancel()
	sent := time.Now()
	renewed, err := s.cfg.Store.RunLeaseRenew(ctx, &store.RunLeaseRenewParams{Owner: s.cfg.Owner, IDs: ids, Lease: s.cfg.Lease})
	if err != nil {
		s.cfg.Logger.Warn("stepwise: lease renewal failed", "runs", len(ids), "err", err)
		return
	}
	for _, x := range xs {
		if slices.Contains(renewed, x.LeasedRun()) {
			s.Leases.Set(x.LeasedRun(), sent)
			continue
		}
		x.LeaseRefused()
	}
}

// stopStalled stops the executions whose lease has not been renewed for
// two thirds of its length: the database did not answer, and the lease
// must not lapse while this process still executes the run.
func (s *Service) stopStalled() {
	var stalled []Lessee
	for _, x := range s.cfg.Lessees() {
		at, ok := s.Leases.Get(x.LeasedRun())
		if ok && x.Running() && time.Since(at) >= s.cfg.Lease*2/3 {
			stalled = append(stalled, x)
		}
	}
	if len(stalled) == 0 {
		return
	}
	s.cfg.Logger.Error("stepwise: the database has not renewed this instance's leases; stopping its executions before the leases lapse",
		"executions", len(stalled), "lease", s.cfg.Lease)
	for _, x := range stalled {
		x.Stop(ErrLeaseStalled)
	}
}
