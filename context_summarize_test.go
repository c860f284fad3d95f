package stepwise_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// The summarize strategy folds only the newly trimmed messages into the
// previous summary, records each summary call on its context step (model,
// tokens), and those tokens count in the session's totals.
func TestContextSummarizeIncremental(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var requests []string
	m := &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		if strings.HasPrefix(req.System, "Summarize") {
			mu.Lock()
			defer mu.Unlock()
			requests = append(requests, req.Messages[0].Content)
			return &llm.Response{Content: fmt.Sprintf("S%d", len(requests)), Usage: llm.Usage{InputTokens: 100, OutputTokens: 7}}, nil
		}
		return &llm.Response{Content: strings.Repeat("y", 400), Usage: llm.Usage{InputTokens: 1, OutputTokens: 1}}, nil
	}}
	e, st := newEngine(t, &stepwise.Agent{Name: "sum", Model: m, Context: stepwise.ContextPolicy{TokenBudget: 250, Strategy: "summarize"}})
	ctx := context.Background()
	r, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "sum", Input: "turn-0"}))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 6; i++ {
		if _, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "sum", Input: fmt.Sprintf("turn-%d", i), SessionID: r.SessionID})); err != nil {
			t.Fatal(err)
		}
	}
	if len(requests) < 2 {
		t.Fatalf("%d summary calls, want several", len(requests))
	}
	for i, req := range requests[1:] {
		if !strings.HasPrefix(req, fmt.Sprintf("Summary so far:\nS%d\n", i+1)) {
			t.Errorf("summary call %d does not start from the previous summary: %.80q", i+2, req)
		}
		if strings.Contains(req, "turn-0") {
			t.Errorf("summary call %d re-sends messages summarized before: %.200q", i+2, req)
		}
	}
	var stepTokens, summaryTokens int64
	systems := 0
	for _, s := range steps(t, st, r.SessionID) {
		stepTokens += s.Metrics.InputTokens
		if s.Kind == steptype.KindSystem && s.Name == "context" {
			systems++
			if s.Metrics.InputTokens != 100 || s.Metrics.OutputTokens != 7 || s.Metrics.Model != "fake:test" {
				t.Errorf("context step %d metrics %+v: the summary call is not recorded", s.Sequence, s.Metrics)
			}
			summaryTokens += s.Metrics.InputTokens
		}
	}
	if systems != len(requests) {
		t.Errorf("%d context steps for %d summary calls", systems, len(requests))
	}
	sess, err := st.SessionGet(ctx, &store.SessionGetParams{ID: r.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	if sess.InputTokens != stepTokens || summaryTokens == 0 {
		t.Errorf("session input tokens %d, steps %d (summaries %d)", sess.InputTokens, stepTokens, summaryTokens)
	}
}
