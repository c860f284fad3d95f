package stepwise_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
)

// ctxModel is a model whose answer may depend on the call's context.
type ctxModel struct {
	fn func(ctx context.Context) (*llm.Response, error)
}

func (m *ctxModel) Name() string { return "fake:ctx" }

func (m *ctxModel) Generate(ctx context.Context, _ *llm.Request) iter.Seq2[*llm.Response, error] {
	return func(yield func(*llm.Response, error) bool) { yield(m.fn(ctx)) }
}

func replyAgent(name, text string) *stepwise.Agent {
	return &stepwise.Agent{Name: name, Model: &ctxModel{fn: func(context.Context) (*llm.Response, error) { return &llm.Response{Content: text}, nil }}}
}

// waitStatus polls the store until the run reaches a status in want.
func waitStatus(t *testing.T, st store.Store, runID string, want ...steptype.RunStatus) *stepwise.Run {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r, err := st.RunGet(context.Background(), &store.RunGetParams{ID: runID})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if r.Status == w {
				return r
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("run %s never reached %v", runID, want)
	return nil
}

func startEngine(t *testing.T, st store.Store, cfg stepwise.Config) *stepwise.Engine {
	t.Helper()
	cfg.Store = st
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 10 * time.Millisecond
	}
	e, err := stepwise.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// A run of an agent this instance does not know waits for an instance that
// knows it (a rolling deploy), instead of being failed.
func TestUnknownAgentRunWaits(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	creator, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{replyAgent("new-agent", "hi from the new version")}})
	if err != nil {
		t.Fatal(err)
	}
	waiting, err := creator.StartRun(ctx, stepwise.StartParams{Agent: "new-agent", Input: "x"})
	if err != nil {
		t.Fatal(err)
	}
	// An instance of the previous version, which knows only "chat", runs
	// a run created after the other: its executor has looked at both.
	oldInstance := startEngine(t, st, stepwise.Config{Agents: []*stepwise.Agent{replyAgent("chat", "hi")}, Owner: "old"})
	r, err := oldInstance.StartRun(ctx, stepwise.StartParams{Agent: "chat", Input: "x"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, st, r.ID, steptype.RunCompleted)
	if got := waitStatus(t, st, waiting.ID, steptype.RunQueued, steptype.RunFailed); got.Status != steptype.RunQueued || got.LeaseOwner != "" {
		t.Fatalf("run of an unknown agent = %s leased by %q (%+v), want queued for another instance", got.Status, got.LeaseOwner, got.Error)
	}
	startEngine(t, st, stepwise.Config{Agents: []*stepwise.Agent{replyAgent("new-agent", "hi from the new version")}, Owner: "new"})
	if got := waitStatus(t, st, waiting.ID, steptype.RunCompleted, steptype.RunFailed); got.Status != steptype.RunCompleted || got.Output != "hi from the new version" {
		t.Fatalf("run on the instance that knows its agent = %s %q", got.Status, got.Output)
	}
}

// A run whose load fails is tried a bounded number of times (the count is
// stored with the run), then failed with the reason.
func TestLoadFailureBoundedAttempts(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	// Options the engine cannot read: every load fails.
	if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "r", SessionID: "s", Agent: "chat", Options: json.RawMessage(`{"replay":5}`)}}); err != nil {
		t.Fatal(err)
	}
	startEngine(t, st, stepwise.Config{Agents: []*stepwise.Agent{replyAgent("chat", "hi")}, Logger: slog.New(slog.DiscardHandler)})
	r := waitStatus(t, st, "r", steptype.RunFailed, steptype.RunCompleted)
	if r.Status != steptype.RunFailed || r.Error == nil || r.Error.Code != "load_failed" || r.Error.Attempt != stepwise.MaxLoadAttempts ||
		!strings.Contains(r.Error.Message, "run options") {
		t.Fatalf("run = %s %+v, want failed after %d load attempts with the reason", r.Status, r.Error, stepwise.MaxLoadAttempts)
	}
}

// Two engines of one process on one exclusive store: the second never
// takes over a lease the first holds (it is alive); it would take over the
// lease of an owner that is not alive in this process (a dead process).
func TestExclusiveStoreNoStealInProcess(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	release := make(chan struct{})
	slow := &stepwise.Agent{Name: "slow", Model: &ctxModel{fn: func(context.Context) (*llm.Response, error) {
		<-release
		return &llm.Response{Content: "done"}, nil
	}}}
	a := startEngine(t, st, stepwise.Config{Agents: []*stepwise.Agent{slow}, Owner: "engine-a"})
	run, err := a.StartRun(ctx, stepwise.StartParams{Agent: "slow", Input: "x"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, st, run.ID, steptype.RunRunning)
	b, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{slow}, Owner: "engine-b"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Wait(ctx, b.Execute(ctx, run.ID)); !errors.Is(err, stepwise.ErrConflict) {
		t.Fatalf("second engine executing a run the first holds: %v, want ErrConflict", err)
	}
	if r, _ := st.RunGet(ctx, &store.RunGetParams{ID: run.ID}); r.LeaseOwner != "engine-a" {
		t.Fatalf("lease now held by %q, want engine-a", r.LeaseOwner)
	}
	close(release)
	waitStatus(t, st, run.ID, steptype.RunCompleted)

	// A lease of an owner not alive in this process: taken over at once.
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: &steptype.Run{ID: "dead", SessionID: "s2", Agent: "slow", Status: steptype.RunRunning,
		LeaseOwner: "a-dead-process", LeaseExpires: time.Now().Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Wait(ctx, b.Execute(ctx, "dead")); err != nil || r.Status != steptype.RunCompleted {
		t.Fatalf("takeover of a dead process's lease: %+v, %v", r, err)
	}
}

// stallStore stalls lease renewals on demand, like a database that stops
// answering.
type stallStore struct {
	store.Store
	mu      sync.Mutex
	stalled bool
}

func (s *stallStore) RunLeaseRenew(ctx context.Context, p *store.RunLeaseRenewParams) ([]string, error) {
	s.mu.Lock()
	stalled := s.stalled
	s.mu.Unlock()
	if stalled {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Store.RunLeaseRenew(ctx, p)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// When lease renewals stall, the instance stops executing (and says so)
// while its lease, measured by the store's clock, is still valid: no other
// instance can have taken the run over yet.
func TestStalledRenewalStopsBeforeLeaseLapses(t *testing.T) {
	ctx := context.Background()
	st := &stallStore{Store: memory.New()}
	stoppedAt := make(chan time.Time, 1)
	started := make(chan struct{})
	var once sync.Once
	agent := &stepwise.Agent{Name: "long", Model: &ctxModel{fn: func(ctx context.Context) (*llm.Response, error) {
		once.Do(func() { close(started) })
		<-ctx.Done()
		stoppedAt <- time.Now()
		return nil, ctx.Err()
	}}}
	var logs syncBuffer
	const lease = 3 * time.Second
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{agent}, Lease: lease, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var runID string
	var execErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range e.Run(ctx, stepwise.StartParams{Agent: "long", Input: "x"}) {
			if err != nil {
				execErr = err
				return
			}
			runID = ev.RunID
		}
	}()
	<-started
	st.mu.Lock()
	st.stalled = true
	st.mu.Unlock()
	at := <-stoppedAt
	<-done
	if !errors.Is(execErr, stepwise.ErrLeaseStalled) {
		t.Fatalf("execution ended with %v, want ErrLeaseStalled", execErr)
	}
	r, err := st.RunGet(ctx, &store.RunGetParams{ID: runID})
	if err != nil {
		t.Fatal(err)
	}
	if !at.Before(r.LeaseExpires) {
		t.Fatalf("execution stopped at %v, after its lease expired at %v", at, r.LeaseExpires)
	}
	if !strings.Contains(logs.String(), "stopping its executions before the leases lapse") {
		t.Fatalf("the instance did not say why it stopped: %s", logs.String())
	}
}
