package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
	"github.com/stepwise-run/stepwise/wire"
)

// Defaults of Config.
const (
	DefaultLease       = 15 * time.Second
	DefaultWait        = 30 * time.Second
	DefaultMaxWait     = 60 * time.Second
	DefaultMaxTasks    = 16
	DefaultRecheck     = time.Second
	DefaultEventsBatch = 256
)

// Config configures a Service. Engine and Build are required.
type Config struct {
	// Engine runs the agents workers serve. Required.
	Engine *stepwise.Engine
	// Build turns an agent definition (an agent file as JSON) into an
	// agent without handlers, refusing what a worker may not register.
	// Required.
	Build func(ctx context.Context, definition json.RawMessage) (*stepwise.Agent, error)
	// Lease is how long a claim holds without a heartbeat. Default
	// DefaultLease (15s).
	Lease time.Duration
	// Wait is a poll's wait when it names none. Default DefaultWait (30s).
	Wait time.Duration
	// MaxWait bounds a poll's wait. Default DefaultMaxWait (60s).
	MaxWait time.Duration
	// MaxTasks bounds the tasks one poll claims. Default DefaultMaxTasks.
	MaxTasks int
	// Recheck is how often a waiting poll or handler re-reads the table
	// besides its notifications (expired leases, lost notifications).
	// Default DefaultRecheck (1s).
	Recheck time.Duration
	// MaxBodyBytes is the request body limit the server enforces,
	// reported to workers. Default 1 MiB.
	MaxBodyBytes int64
	// Logger receives background errors. Default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.Wait <= 0 {
		c.Wait = DefaultWait
	}
	if c.MaxWait <= 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.MaxTasks <= 0 {
		c.MaxTasks = DefaultMaxTasks
	}
	if c.Recheck <= 0 {
		c.Recheck = DefaultRecheck
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Service registers workers' agents and serves their tasks.
type Service struct {
	cfg    Config
	store  store.Store
	hub    *hub
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	regs map[string]*registration // by agent name
	// regMu serializes registrations: between the check that a new
	// agent's name is free and its entry in regs, another registration of
	// the same agent would see the engine's agent and take it for one the
	// server defines.
	regMu sync.Mutex

	claimMu sync.Mutex
	claimed map[string]*store.Task // by id: the tasks this process's polls claimed, as claimed
	stops   map[string]uint64      // by worker id: its graceful stops (ReleaseWorker) so far

	waiting atomic.Int64 // polls held with nothing to claim

	stats *stats // per worker, since the Service started (GET /v1/workers)
}

// registration is what workers registered for one agent.
type registration struct {
	fingerprint string
	version     string
	agent       *stepwise.Agent
	steps       map[string]*wire.WorkerStep
	tools       map[string]*workerTool
	workers     map[string]bool
}

// New returns a service and starts its listener of the store's task
// notifications (when the store has a Notifier); Close stops it.
func New(cfg Config) (*Service, error) {
	if cfg.Engine == nil || cfg.Build == nil {
		return nil, fmt.Errorf("stepwise: worker config: Engine and Build are required")
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{cfg: cfg, store: cfg.Engine.Store(), hub: newHub(), cancel: cancel, done: make(chan struct{}), regs: map[string]*registration{},
		claimed: map[string]*store.Task{}, stops: map[string]uint64{}, stats: newStats()}
	go s.listen(ctx)
	return s, nil
}

// Close stops the listener.
func (s *Service) Close() error {
	s.cancel()
	<-s.done
	return nil
}

// Waiting returns the number of polls held now: their last claim found
// no task, and they wait for a notification (or the recheck) to claim
// again.
func (s *Service) Waiting() int { return int(s.waiting.Load()) }

// Limits are the numbers a worker works with.
func (s *Service) Limits() wire.WorkerProtocolLimit {
	return wire.WorkerProtocolLimit{LeaseMS: s.cfg.Lease.Milliseconds(), HeartbeatMS: (s.cfg.Lease / 3).Milliseconds(),
		MaxPollMS: s.cfg.MaxWait.Milliseconds(), MaxTasks: s.cfg.MaxTasks, MaxBodyBytes: s.cfg.MaxBodyBytes, MaxEventsBatch: DefaultEventsBatch}
}

// listen turns the store's task notifications into the hub's wake-ups.
func (s *Service) listen(ctx context.Context) {
	defer close(s.done)
	n := s.store.Notifier()
	if n == nil {
		return // one process: every change is made, and announced, here
	}
	// A failed listen is tried again after Recheck, doubling up to a
	// minute while it keeps failing (a store that is down or closed).
	wait := s.cfg.Recheck
	for ctx.Err() == nil {
		ch, err := n.Listen(ctx, store.ChannelTasks)
		if err != nil {
			s.cfg.Logger.Warn("stepwise: worker task notifications", "err", err, "retry_in", wait)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, time.Minute)
			continue
		}
		wait = s.cfg.Recheck
		for p := range ch {
			switch {
			case len(p) > 2 && p[:2] == "Q ":
				s.hub.taskQueued(p[2:])
			case len(p) > 2 && p[:2] == "F ":
				s.hub.taskFinished(p[2:], nil)
			default:
				s.hub.wakeAll()
			}
		}
	}
}

var workerID = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

// Register registers a worker's agents: idempotent for an unchanged
// definition; a changed one is registered with the engine as a new agent
// version.
func (s *Service) Register(ctx context.Context, req *wire.WorkerRegister) (*wire.WorkerRegistered, error) {
	if !workerID.MatchString(req.WorkerID) {
		return nil, invalid("worker_id %q: want 1-128 of letters, digits, _ . : -", req.WorkerID)
	}
	if len(req.Agents) == 0 {
		return nil, invalid("agents: register at least one agent")
	}
	s.regMu.Lock()
	defer s.regMu.Unlock()
	out := &wire.WorkerRegistered{WorkerID: req.WorkerID, Agents: []*wire.RegisteredAgent{}, Limits: s.Limits()}
	// Build every agent first: a registration with one bad agent changes nothing.
	type built struct {
		reg     *registration
		changed bool
	}
	var all []built
	seen := map[string]bool{}
	for i, wa := range req.Agents {
		reg, err := s.build(ctx, wa)
		if err != nil {
			return nil, fmt.Errorf("agents[%d]: %w", i, err)
		}
		name := reg.agent.Name
		if seen[name] {
			return nil, invalid("agents[%d]: agent %q is registered twice", i, name)
		}
		seen[name] = true
		s.mu.Lock()
		old := s.regs[name]
		s.mu.Unlock()
		if old == nil {
			if _, err := s.cfg.Engine.Agent(name); err == nil {
				return nil, fmt.Errorf("%w: agents[%d]: agent %q is defined by the server itself", ErrInvalidDefinition, i, name)
			}
		}
		all = append(all, built{reg: reg, changed: old == nil || old.fingerprint != reg.fingerprint})
	}
	for _, b := range all {
		name := b.reg.agent.Name
		s.mu.Lock()
		old := s.regs[name]
		if !b.changed {
			old.workers[req.WorkerID] = true
			out.Agents = append(out.Agents, &wire.RegisteredAgent{Name: name, Version: old.version})
			s.mu.Unlock()
			continue
		}
		s.mu.Unlock()
		if err := s.cfg.Engine.Register(b.reg.agent); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidDefinition, err)
		}
		a, err := s.cfg.Engine.Agent(name)
		if err != nil {
			return nil, err
		}
		b.reg.version = a.Version
		b.reg.workers = map[string]bool{req.WorkerID: true}
		s.mu.Lock()
		if old != nil {
			for w := range old.workers {
				b.reg.workers[w] = true
			}
		}
		s.regs[name] = b.reg
		s.mu.Unlock()
		changed := old == nil || old.version != b.reg.version
		out.Agents = append(out.Agents, &wire.RegisteredAgent{Name: name, Version: b.reg.version, Changed: changed})
	}
	names := make([]string, len(out.Agents))
	for i, a := range out.Agents {
		names[i] = a.Name
	}
	s.stats.registered(req.WorkerID, names)
	return out, nil
}

// build makes the agent of one registration, its worker steps and tools
// attached.
func (s *Service) build(ctx context.Context, wa *wire.WorkerAgent) (*registration, error) {
	if wa == nil || len(wa.Definition) == 0 {
		return nil, fmt.Errorf("%w: definition is required", ErrInvalidDefinition)
	}
	a, err := s.cfg.Build(ctx, wa.Definition)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidDefinition, err)
	}
	reg := &registration{agent: a, steps: map[string]*wire.WorkerStep{}, tools: map[string]*workerTool{}}
	if a.Steps == nil {
		a.Steps = map[string]stepwise.Handler{}
	}
	for i, st := range wa.Steps {
		if st == nil || st.Name == "" {
			return nil, fmt.Errorf("%w: steps[%d]: a step needs a name", ErrInvalidDefinition, i)
		}
		if st.Name == stepwise.StepEnd || reg.steps[st.Name] != nil {
			return nil, fmt.Errorf("%w: steps[%d]: step name %q is taken", ErrInvalidDefinition, i, st.Name)
		}
		reg.steps[st.Name] = st
		a.Steps[st.Name] = &stepHandler{svc: s, agent: a.Name, step: st}
	}
	for i, wt := range wa.Tools {
		t, err := newWorkerTool(s, a.Name, wt)
		if err != nil {
			return nil, fmt.Errorf("%w: tools[%d]: %v", ErrInvalidDefinition, i, err)
		}
		for _, other := range a.Tools {
			if other.Definition().Name == wt.Name {
				return nil, fmt.Errorf("%w: tools[%d]: tool %q is taken", ErrInvalidDefinition, i, wt.Name)
			}
		}
		reg.tools[wt.Name] = t
		a.Tools = append(a.Tools, t)
	}
	reg.fingerprint = fingerprint(wa)
	return reg, nil
}

// fingerprint identifies a registration's content: its definition as
// canonical JSON and its handlers.
func fingerprint(wa *wire.WorkerAgent) string {
	var def any
	_ = json.Unmarshal(wa.Definition, &def)
	b, _ := json.Marshal(struct {
		Def   any
		Steps []*wire.WorkerStep
		Tools []*wire.WorkerTool
	}{def, wa.Steps, wa.Tools})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// registered returns the registration of agent, or nil.
func (s *Service) registered(agent string) *registration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.regs[agent]
}

// workerTool is a tool served by workers.
type workerTool struct {
	svc    *Service
	agent  string
	def    *wire.WorkerTool
	params json.RawMessage
	output *jsonschema.Resolved
}

func newWorkerTool(s *Service, agent string, wt *wire.WorkerTool) (*workerTool, error) {
	if wt == nil || wt.Name == "" {
		return nil, fmt.Errorf("a tool needs a name")
	}
	t := &workerTool{svc: s, agent: agent, def: wt, params: wt.Parameters}
	if len(t.params) == 0 {
		t.params = json.RawMessage(`{"type":"object"}`)
	}
	if _, err := compile(t.params); err != nil {
		return nil, fmt.Errorf("tool %q parameters: %v", wt.Name, err)
	}
	if len(wt.Output) > 0 {
		r, err := compile(wt.Output)
		if err != nil {
			return nil, fmt.Errorf("tool %q output_schema: %v", wt.Name, err)
		}
		t.output = r
	}
	return t, nil
}

func compile(raw json.RawMessage) (*jsonschema.Resolved, error) {
	var sc jsonschema.Schema
	if err := json.Unmarshal(raw, &sc); err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	return sc.Resolve(nil)
}

var _ tool.Tool = (*workerTool)(nil)

// builtinSteps are the steps every agent has.
var builtinSteps = []string{stepwise.StepLLM, stepwise.StepTools, stepwise.StepEnd}

// hasStep reports whether agent a has a step name.
func hasStep(a *stepwise.Agent, name string) bool {
	if slices.Contains(builtinSteps, name) {
		return true
	}
	_, ok := a.Steps[name]
	return ok
}
