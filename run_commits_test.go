package stepwise_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/tool"
)

// commitLog records the writes an engine makes to its store.
type commitLog struct {
	store.Store
	mu      sync.Mutex
	updates []*store.RunUpdateParams
	appends []*store.StepAppendParams
	runRead int      // StepList calls by run
	creates []string // SessionCreate calls, and RunCreate calls with a session ("run+session")
}

func (c *commitLog) SessionCreate(ctx context.Context, p *store.SessionCreateParams) (*stepwise.Session, error) {
	c.mu.Lock()
	c.creates = append(c.creates, "session")
	c.mu.Unlock()
	return c.Store.SessionCreate(ctx, p)
}

func (c *commitLog) RunCreate(ctx context.Context, p *store.RunCreateParams) (*stepwise.Run, error) {
	c.mu.Lock()
	if p.Session != nil {
		c.creates = append(c.creates, "run+session")
	} else {
		c.creates = append(c.creates, "run")
	}
	c.mu.Unlock()
	return c.Store.RunCreate(ctx, p)
}

func (c *commitLog) StepList(ctx context.Context, p *store.StepListParams) ([]*stepwise.Step, error) {
	if p.RunID != "" {
		c.mu.Lock()
		c.runRead++
		c.mu.Unlock()
	}
	return c.Store.StepList(ctx, p)
}

func (c *commitLog) RunUpdate(ctx context.Context, p *store.RunUpdateParams) (*stepwise.Run, error) {
	c.mu.Lock()
	cp := *p
	c.updates = append(c.updates, &cp)
	c.mu.Unlock()
	return c.Store.RunUpdate(ctx, p)
}

func (c *commitLog) StepAppend(ctx context.Context, p *store.StepAppendParams) ([]*stepwise.Step, error) {
	c.mu.Lock()
	cp := *p
	cp.Runs = nil
	for _, r := range p.Runs {
		rc := *r
		cp.Runs = append(cp.Runs, &rc)
	}
	c.appends = append(c.appends, &cp)
	c.mu.Unlock()
	return c.Store.StepAppend(ctx, p)
}

// The run's final answer and its completion commit together: a run of the
// tool loop makes no write of its own to finish (a transaction fewer per
// run), and what it leaves is what a separate finish left — completed, the
// answer (as masked) for output, the lease released, run_finished after
// the answer's step_completed.
func TestRunCompletesWithItsLastStep(t *testing.T) {
	t.Parallel()
	m := &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		if assistantTurns(req) == 0 {
			return &llm.Response{ToolCalls: []stepwise.ToolCall{call("c1", "echo", `{}`)}}, nil
		}
		return &llm.Response{Content: "the answer"}, nil
	}}
	echo := tool.Func(llm.ToolDef{Name: "echo", Parameters: []byte(`{"type":"object"}`)}, func(ctx context.Context, c *tool.Call) (*tool.Result, error) {
		return &tool.Result{Content: "echoed"}, nil
	})
	st := &commitLog{Store: memory.New()}
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{{Name: "loop", Model: m, Tools: []tool.Tool{echo}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.Mask(func(s *stepwise.Step) { s.Content = strings.ReplaceAll(s.Content, "answer", "[masked]") })
	ctx := context.Background()
	r, err := e.StartRun(ctx, stepwise.StartParams{Agent: "loop", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for ev, err := range e.Execute(ctx, r.ID) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case stepwise.EventStepCompleted:
			order = append(order, string(ev.Step.Kind))
		case stepwise.EventRunFinished:
			order = append(order, "finished:"+string(ev.Run.Status)+":"+ev.Run.Output)
		}
	}
	if got, want := strings.Join(order, " "), "user llm tool llm finished:completed:the [masked]"; got != want {
		t.Errorf("events %q, want %q", got, want)
	}
	got, err := st.RunGet(ctx, &store.RunGetParams{ID: r.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != steptype.RunCompleted || got.Output != "the [masked]" || got.LeaseOwner != "" || got.FinishedAt.IsZero() || got.StepCount != 4 {
		t.Errorf("run %+v, want completed with the masked answer, no lease, finished, 4 steps", got)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.updates) != 0 {
		t.Errorf("%d RunUpdate calls (the first %+v), want none: the last append completes the run", len(st.updates), st.updates[0])
	}
	last := st.appends[len(st.appends)-1]
	if len(last.Runs) != 1 || last.Runs[0].Status == nil || *last.Runs[0].Status != steptype.RunCompleted ||
		!last.Runs[0].ClearLease || last.Runs[0].Output == nil || len(last.Steps) != 1 || last.Steps[0].Kind != steptype.KindLLM {
		t.Errorf("last append %+v (run %+v), want the answer with the run's completion", last, last.Runs)
	}
}

// A run of a session without steps does not read its own steps when it
// starts (there can be none): one read fewer per new conversation. A run
// of a session with steps still reads them, and a resumed run continues
// from them.
func TestNewSessionRunSkipsItsStepRead(t *testing.T) {
	t.Parallel()
	m := &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		return &llm.Response{Content: "turn " + string(rune('0'+assistantTurns(req)))}, nil
	}}
	st := &commitLog{Store: memory.New()}
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{{Name: "chat", Model: m}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	first, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "chat", Input: "hi"}))
	if err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	reads := st.runRead
	st.mu.Unlock()
	if reads != 0 {
		t.Errorf("the first run of a new session read its steps %d times, want 0", reads)
	}
	second, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "chat", SessionID: first.SessionID, Input: "again"}))
	if err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	reads = st.runRead
	st.mu.Unlock()
	if reads != 1 {
		t.Errorf("the second run of the session read its steps %d times, want 1", reads)
	}
	if first.Output != "turn 0" || second.Output != "turn 1" {
		t.Errorf("outputs %q, %q, want the second turn to see the first", first.Output, second.Output)
	}
}

// sharedLog is a commitLog standing for a store shared with other
// processes (not Exclusive), counting the runs read one by one.
type sharedLog struct {
	commitLog
	gets int
}

func (s *sharedLog) Exclusive() bool { return false }

func (s *sharedLog) RunGet(ctx context.Context, p *store.RunGetParams) (*stepwise.Run, error) {
	s.mu.Lock()
	s.gets++
	s.mu.Unlock()
	return s.Store.RunGet(ctx, p)
}

// On a store shared with other processes, executing a run claims it
// without reading it first (the claim reads it): one read fewer per
// execution. A refusal still says why, and leaves the run as it was.
func TestSharedStoreClaimsWithoutReadingFirst(t *testing.T) {
	t.Parallel()
	m := &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) { return &llm.Response{Content: "ok"}, nil }}
	st := &sharedLog{commitLog: commitLog{Store: memory.New()}}
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{{Name: "a", Model: m}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	r, err := e.StartRun(ctx, stepwise.StartParams{Agent: "a", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range e.Execute(ctx, r.ID) {
		if err != nil {
			t.Fatal(err)
		}
	}
	st.mu.Lock()
	gets := st.gets
	st.mu.Unlock()
	if gets != 0 {
		t.Errorf("executing a queued run read it %d times, want 0 (the claim reads it)", gets)
	}
	// Refusals: a finished run, a run leased elsewhere, a run of an agent
	// this engine does not have.
	for _, err := range e.Execute(ctx, r.ID) {
		if !errors.Is(err, stepwise.ErrRunFinished) {
			t.Errorf("executing a finished run: %v, want ErrRunFinished", err)
		}
	}
	sess, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s2", Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	leased, err := st.RunCreate(ctx, &store.RunCreateParams{Run: &stepwise.Run{ID: "leased", SessionID: sess.ID, Agent: "a", Status: steptype.RunRunning, LeaseOwner: "other"}, LeaseFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range e.Execute(ctx, leased.ID) {
		if !errors.Is(err, stepwise.ErrConflict) || !strings.Contains(fmt.Sprint(err), "leased by another owner") {
			t.Errorf("executing a run leased elsewhere: %v, want a conflict", err)
		}
	}
	if _, err := st.SessionCreate(ctx, &store.SessionCreateParams{ID: "s3", Agent: "b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RunCreate(ctx, &store.RunCreateParams{Run: &stepwise.Run{ID: "other-agent", SessionID: "s3", Agent: "b"}}); err != nil {
		t.Fatal(err)
	}
	for _, err := range e.Execute(ctx, "other-agent") {
		if !errors.Is(err, stepwise.ErrUnknownAgent) {
			t.Errorf("executing a run of an unknown agent: %v, want ErrUnknownAgent", err)
		}
	}
	for id, want := range map[string]string{"leased": "running other", "other-agent": "queued "} {
		got, err := st.RunGet(ctx, &store.RunGetParams{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if s := string(got.Status) + " " + got.LeaseOwner; s != want {
			t.Errorf("run %s left %q, want %q", id, s, want)
		}
	}
}

// A run that starts a new session creates it in its own RunCreate (one
// transaction), not with a SessionCreate before it; a run of an existing
// session creates the run only.
func TestNewSessionCreatedWithItsRun(t *testing.T) {
	t.Parallel()
	m := &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) { return &llm.Response{Content: "ok"}, nil }}
	st := &commitLog{Store: memory.New()}
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{{Name: "a", Model: m}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	r, err := e.StartRun(ctx, stepwise.StartParams{Agent: "a", Input: "go", Title: "t", Metadata: map[string]any{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := st.SessionGet(ctx, &store.SessionGetParams{ID: r.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	if sess.Agent != "a" || sess.Title != "t" || string(sess.Metadata) != `{"k":"v"}` {
		t.Errorf("session %+v", sess)
	}
	if _, err := e.Wait(ctx, e.Execute(ctx, r.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.StartRun(ctx, stepwise.StartParams{Agent: "a", SessionID: r.SessionID, Input: "again"}); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if got := strings.Join(st.creates, " "); got != "run+session run" {
		t.Errorf("creations %q, want %q", got, "run+session run")
	}
}
