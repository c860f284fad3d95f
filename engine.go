package stepwise

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stepwise-run/stepwise/internal/protocol"

	"github.com/stepwise-run/stepwise/internal/observation"

	"github.com/stepwise-run/stepwise/internal/runexec"
	"github.com/stepwise-run/stepwise/llm"

	"github.com/stepwise-run/stepwise/internal/broker"
	"github.com/stepwise-run/stepwise/internal/executor"
	"github.com/stepwise-run/stepwise/internal/ids"
	"github.com/stepwise-run/stepwise/store"
)

// Config configures an Engine. Only Store is required.
type Config struct {
	// Store persists sessions, steps and runs. Required.
	Store store.Store
	// Agents are registered at construction; more can be added with Register.
	Agents []*Agent
	// Owner identifies this engine instance in run leases. Default
	// "HOSTNAME-PID-RANDOM".
	Owner string
	// Lease is how long a claimed run stays owned without a heartbeat.
	// Default 30s; heartbeats run every Lease/3.
	Lease time.Duration
	// Workers bounds the runs the background executor (Start) runs at once.
	// Default 64.
	Workers int
	// PollInterval is how often the background executor looks for runnable
	// runs queued by other processes. Default 1s.
	PollInterval time.Duration
	// Prices is the price table used to compute step cost. Default
	// llm.DefaultPrices().
	Prices llm.PriceTable
	// ContextWindows gives the context window of models, from which an
	// agent without a token budget takes its default one (see
	// ContextPolicy.TokenBudget). Default llm.DefaultContextWindows().
	ContextWindows llm.ContextWindows
	// Logger receives background errors. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// NoStepResources turns off the measure of what each step costs the
	// machine (steptype.Metrics.CPUTime, AllocBytes, AllocObjects,
	// OverlappingSteps stay zero), and its cost per step. The environment
	// variable STEPWISE_STEP_RESOURCES=off sets it too.
	NoStepResources bool
}

func (c Config) withDefaults() Config {
	if os.Getenv("STEPWISE_STEP_RESOURCES") == "off" {
		c.NoStepResources = true
	}
	if c.Owner == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if c.Lease == 0 {
		c.Lease = 30 * time.Second
	}
	if c.Workers == 0 {
		c.Workers = 64
	}
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
	if c.Prices == nil {
		c.Prices = llm.DefaultPrices()
	}
	if c.ContextWindows == nil {
		c.ContextWindows = llm.DefaultContextWindows()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Engine runs agents over a store. It is safe for concurrent use.
type Engine struct {
	cfg Config
	// procClock: cfg.Now is the default, time.Now (see nowRead).
	procClock bool
	store     store.Store
	broker    *broker.Broker

	mu       sync.Mutex
	agents   map[string]*Agent
	active   map[string]*execution // run id → execution in this process
	runEnv   *runexec.Env          // what the executions share
	proto    *protocol.Projector   // the client protocol's events
	sessLock broker.SessionLocks   // per-session commit locks
	closed   bool

	// exec is the background executor: claims, leases and their
	// heartbeat, change notifications (internal/executor).
	exec *executor.Service

	hooksMu sync.RWMutex
	hooks   []func(*Step) // OnCommit callbacks (hooks.go)

	obsOnce sync.Once
	obs     atomic.Pointer[observation.State] // observers and masks (engine_observe.go); read on every step without e.mu

}

// New returns an engine. It does not start background work; call Start to
// execute queued runs in the background (the server does).
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("stepwise: config: Store is required")
	}
	procClock := cfg.Now == nil
	cfg = cfg.withDefaults()
	e := &Engine{
		cfg: cfg, store: cfg.Store, broker: broker.New(), procClock: procClock,
		agents: map[string]*Agent{}, active: map[string]*execution{},
	}
	e.proto = &protocol.Projector{Store: e.store, Broker: e.broker}
	e.runEnv = &runexec.Env{Store: e.store, Broker: e.broker, Owner: cfg.Owner, Now: e.now, NowRead: e.nowRead,
		LockSession: e.lockSession, Mask: e.maskSteps, AfterCommit: e.afterCommit}
	for _, a := range cfg.Agents {
		if err := e.Register(a); err != nil {
			return nil, err
		}
	}
	e.exec = e.newExecutor()
	executor.RegisterOwner(cfg.Owner)
	return e, nil
}

// Store returns the engine's store.
func (e *Engine) Store() store.Store { return e.store }

// Owner returns the lease owner id of this engine.
func (e *Engine) Owner() string { return e.cfg.Owner }

// Register adds an agent (and, recursively, its sub-agents). Registering a
// name twice replaces the earlier definition.
func (e *Engine) Register(a *Agent) error {
	return e.register(a, map[*Agent]bool{})
}

func (e *Engine) register(a *Agent, seen map[*Agent]bool) error {
	if a == nil {
		return fmt.Errorf("stepwise: register: nil agent")
	}
	if seen[a] {
		return nil // an agent that is its own (indirect) sub-agent
	}
	seen[a] = true
	d := a.withDefaults()
	if err := d.validate(); err != nil {
		return err
	}
	if d.Version == "" {
		d.Version = d.version()
	}
	d.budget, d.budgeted = budgetOf(d, e.cfg.ContextWindows), true
	e.mu.Lock()
	e.agents[d.Name] = d
	e.mu.Unlock()
	for _, s := range a.SubAgents {
		if err := e.register(s, seen); err != nil {
			return err
		}
	}
	return nil
}

// Agent returns a registered agent.
func (e *Engine) Agent(name string) (*Agent, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	a, ok := e.agents[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownAgent, name)
	}
	return a, nil
}

// Agents lists the registered agents by name.
func (e *Engine) Agents() []*Agent {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*Agent, 0, len(e.agents))
	for _, a := range e.agents {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// lockSession serializes commits (and their event publication) per session,
// so event positions follow sequence order.
func (e *Engine) lockSession(id string) func() {
	l := e.refSession(id)
	l.Lock()
	return func() {
		l.Unlock()
		e.unrefSession(id, l)
	}
}

// refSession returns the commit lock of a session, kept in the engine until
// the matching unrefSession. The locks live in a sharded table, so taking
// one does not take the engine's mutex.
func (e *Engine) refSession(id string) *broker.SessionLock {
	return e.sessLock.Acquire(id)
}

func (e *Engine) unrefSession(id string, l *broker.SessionLock) {
	e.sessLock.Release(id, l)
}

func (e *Engine) now() time.Time { return e.cfg.Now().UTC() }

// nowRead is now, and the same reading of the process clock (time.Now,
// with its monotonic part) when the engine's clock is the default one:
// what an id's timestamp or a step's deadline would read a moment later,
// so that one reading serves both. With a clock of the caller's (a test's
// fixed time) proc is zero and those read the process clock themselves.
func (e *Engine) nowRead() (now, proc time.Time) {
	if e.procClock {
		proc = e.cfg.Now()
		return proc.UTC(), proc
	}
	return e.now(), time.Time{}
}

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

// NewID returns a new sortable id (UUIDv7). It allocates only the string.
func NewID() string { return ids.At(time.Now()) }

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
