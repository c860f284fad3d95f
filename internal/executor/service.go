package executor

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/stepwise-run/stepwise/internal/broker"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// ErrStopping is returned by Start once Stop began.
var ErrStopping = errors.New("executor: stopping")

// Config is what the service needs from the engine. Every field is
// required.
type Config struct {
	Store store.Store
	// Broker receives the change notifications of other instances.
	Broker *broker.Broker
	// Owner is the lease owner; Lease the lease length; Workers bounds the
	// runs executed at once; PollInterval is how often the store is
	// polled for runnable runs.
	Owner        string
	Lease        time.Duration
	Workers      int
	PollInterval time.Duration
	Logger       *slog.Logger
	// Now is the engine's clock (UTC).
	Now func() time.Time
	// Agents lists the agents the engine can execute: only their runs are
	// claimed.
	Agents func() []string
	// Execute executes a run the service claimed, on the service's
	// goroutine for it.
	Execute func(ctx context.Context, r *steptype.Run)
	// Lessees are the executions of this process, whose leases the
	// heartbeat renews.
	Lessees func() []Lessee
	// StopExecutions stops every top-level execution of the process (Stop
	// calls it; they hand their runs back at a step boundary).
	StopExecutions func()
	// Reconcile runs once when the service starts; Sweep before each look
	// for runnable runs.
	Reconcile func(ctx context.Context)
	Sweep     func(ctx context.Context)
}

// Service is the background executor. Its lifecycle is Start, then Stop;
// the lease heartbeat also starts on its own (StartHeartbeat) for runs
// executed inline.
type Service struct {
	cfg Config
	// Leases records when each lease held here was last set.
	Leases LeaseClock

	wake chan struct{}
	stop chan struct{}

	mu       sync.Mutex
	running  bool
	stopping bool // Stop began: no new executions
	once     sync.Once
	stopOnce sync.Once
	// done counts the service's loops; executing the runs it executes.
	done      sync.WaitGroup
	executing sync.WaitGroup
}

// New returns a service that is not started.
func New(cfg Config) *Service {
	return &Service{cfg: cfg, wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

// Wake nudges the service to look for runnable runs. Other instances
// sharing the database are woken by the store, whose notification commits
// with the change that made a run runnable.
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Stopping reports whether Stop began.
func (s *Service) Stopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

// Stopped is closed when Stop begins.
func (s *Service) Stopped() <-chan struct{} { return s.stop }

// Start runs the service until Stop or the end of ctx (calling it again is
// a no-op): it claims runnable runs and executes them, renews their
// leases and follows the store's change notifications.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return ErrStopping
	}
	if s.running {
		s.mu.Unlock()
		return nil // already started
	}
	s.running = true
	s.done.Add(1)
	s.mu.Unlock()
	s.StartHeartbeat()
	lctx, cancelListen := context.WithCancel(context.WithoutCancel(ctx))
	s.listen(lctx)
	go func() {
		defer s.done.Done()
		defer cancelListen()
		sem := make(chan struct{}, s.cfg.Workers)
		s.cfg.Reconcile(ctx)
		t := time.NewTicker(s.cfg.PollInterval)
		defer t.Stop()
		var swept, staleAt time.Time
		var stale map[string]bool
		for {
			if time.Since(swept) >= orphanSweepEvery {
				s.wakeOrphans(ctx)
				swept = time.Now()
			}
			if s.cfg.Store.Exclusive() || time.Since(staleAt) >= staleSweepShared {
				stale, staleAt = s.takeOver(ctx, stale), time.Now()
			}
			s.cfg.Sweep(ctx)
			s.dispatch(ctx, sem)
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-s.wake:
			case <-t.C:
			}
		}
	}()
	return nil
}

// dispatch claims as many runnable runs as there are free workers.
func (s *Service) dispatch(ctx context.Context, sem chan struct{}) {
	for {
		free := cap(sem) - len(sem)
		if free == 0 {
			return
		}
		sent := time.Now()
		runs, err := s.cfg.Store.RunClaim(ctx, &store.RunClaimParams{Owner: s.cfg.Owner, Lease: s.cfg.Lease, Limit: free, Agents: s.cfg.Agents()})
		if err != nil {
			if ctx.Err() == nil {
				s.cfg.Logger.Error("stepwise: claim runs", "err", err)
			}
			return
		}
		if len(runs) == 0 {
			return
		}
		for _, r := range runs {
			s.Leases.Set(r.ID, sent)
		}
		for i, r := range runs {
			sem <- struct{}{}
			s.mu.Lock()
			if s.stopping {
				s.mu.Unlock()
				<-sem
				s.Requeue(runs[i:]) // claimed but never started
				return
			}
			s.executing.Add(1)
			s.mu.Unlock()
			go func() {
				defer func() { <-sem; s.executing.Done() }()
				s.cfg.Execute(ctx, r)
			}()
		}
	}
}

// Stop stops the service and the executions of the process, and waits
// for executing runs to reach a step boundary: they are handed back to the
// queue (status queued), so another process, or the next start, resumes
// them.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	s.stopping = true // from here on nothing adds to done or executing
	s.mu.Unlock()
	s.stopOnce.Do(func() { close(s.stop) })
	s.cfg.StopExecutions()
	done := make(chan struct{})
	// The loop first (it may still be handing runs out), then the
	// executions it started.
	go func() { s.done.Wait(); s.executing.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Requeue hands claimed runs back to the queue.
func (s *Service) Requeue(runs []*steptype.Run) {
	queued := steptype.RunQueued
	for _, r := range runs {
		_, _ = s.cfg.Store.RunUpdate(context.Background(), &store.RunUpdateParams{ID: r.ID, Owner: s.cfg.Owner,
			ExpectStatus: []steptype.RunStatus{steptype.RunRunning}, Status: &queued, ClearLease: true, Now: s.cfg.Now()})
	}
}
