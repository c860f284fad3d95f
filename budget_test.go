package stepwise_test

import (
	"context"
	"fmt"
	"iter"
	"sync/atomic"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
)

// windowModel has a context window of its own (llm.ContextWindower, when
// window > 0) and counts the messages of its last request.
type windowModel struct {
	name   string
	window int
	sent   atomic.Int64
	tokens atomic.Int64
}

func (m *windowModel) Name() string { return m.name }

func (m *windowModel) Generate(_ context.Context, req *llm.Request) iter.Seq2[*llm.Response, error] {
	return func(yield func(*llm.Response, error) bool) {
		m.sent.Store(int64(len(req.Messages)))
		n := 0
		for _, msg := range req.Messages {
			n += stepwise.EstimateTokens(msg)
		}
		m.tokens.Store(int64(n))
		yield(&llm.Response{Content: "done"}, nil)
	}
}

type knownWindow struct{ *windowModel }

func (m knownWindow) ContextWindow() int { return m.window }

// runOnLongSession runs agent a after 200 ingested messages of about nine
// tokens each, and returns the session's steps.
func runOnLongSession(t *testing.T, cfg stepwise.Config, a *stepwise.Agent) []*stepwise.Step {
	t.Helper()
	ctx := context.Background()
	st := memory.New()
	cfg.Store, cfg.Agents = st, []*stepwise.Agent{a}
	e, err := stepwise.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := e.CreateSession(ctx, a.Name, "")
	if err != nil {
		t.Fatal(err)
	}
	var steps []*stepwise.Step
	for j := range 200 {
		role, kind := steptype.RoleUser, steptype.KindUser
		if j%2 == 1 {
			role, kind = steptype.RoleAssistant, steptype.KindLLM
		}
		steps = append(steps, &stepwise.Step{Kind: kind, Role: role, Content: fmt.Sprintf("message %d with some words in it", j)})
	}
	if _, err := e.Ingest(ctx, stepwise.IngestParams{SessionID: s.ID, Steps: steps}); err != nil {
		t.Fatal(err)
	}
	r, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: a.Name, SessionID: s.ID, Input: "next"}))
	if err != nil || r.Status != steptype.RunCompleted {
		t.Fatal(err, r)
	}
	all, err := st.StepList(ctx, &store.StepListParams{SessionID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

func trimSteps(steps []*stepwise.Step) int {
	n := 0
	for _, s := range steps {
		if s.Kind == steptype.KindSystem {
			n++
		}
	}
	return n
}

// An agent without a token budget takes three quarters of its model's
// context window, and the trim is recorded as with an explicit budget.
func TestDefaultTokenBudgetFromModelWindow(t *testing.T) {
	m := &windowModel{name: "local:tiny", window: 400}
	steps := runOnLongSession(t, stepwise.Config{}, &stepwise.Agent{Name: "a", Model: knownWindow{m}})
	if got := m.tokens.Load(); got > 300 || m.sent.Load() >= 201 || m.sent.Load() < 2 {
		t.Fatalf("sent %d messages (%d tokens), want a window of at most 300 tokens", m.sent.Load(), got)
	}
	if trimSteps(steps) != 1 {
		t.Fatalf("%d trim records, want 1", trimSteps(steps))
	}
}

// The window table of Config.ContextWindows is found by the model's name;
// a model it does not know gets DefaultContextWindow.
func TestDefaultTokenBudgetFromWindowTable(t *testing.T) {
	m := &windowModel{name: "local:tiny-7b"}
	runOnLongSession(t, stepwise.Config{ContextWindows: llm.ContextWindows{"tiny": 400}}, &stepwise.Agent{Name: "a", Model: m})
	if got := m.tokens.Load(); got > 300 {
		t.Fatalf("sent %d tokens, want at most 300", got)
	}
	m = &windowModel{name: "local:unknown"}
	runOnLongSession(t, stepwise.Config{}, &stepwise.Agent{Name: "a", Model: m})
	if got := m.sent.Load(); got != 201 {
		t.Fatalf("sent %d messages, want all 201 (under DefaultContextWindow)", got)
	}
}

// NoTokenBudget sends every message, however small the window.
func TestNoTokenBudgetSendsEverything(t *testing.T) {
	m := &windowModel{name: "local:tiny", window: 400}
	steps := runOnLongSession(t, stepwise.Config{}, &stepwise.Agent{Name: "a", Model: knownWindow{m},
		Context: stepwise.ContextPolicy{TokenBudget: stepwise.NoTokenBudget}})
	if got := m.sent.Load(); got != 201 || trimSteps(steps) != 0 {
		t.Fatalf("sent %d messages with %d trims, want 201 and none", got, trimSteps(steps))
	}
}

func TestTokenBudgetBelowNoneRefused(t *testing.T) {
	_, err := stepwise.New(stepwise.Config{Store: memory.New(), Agents: []*stepwise.Agent{{Name: "a", Model: &windowModel{name: "x"},
		Context: stepwise.ContextPolicy{TokenBudget: -2}}}})
	if err == nil {
		t.Fatal("a token budget of -2 was accepted")
	}
}
