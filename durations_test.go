package stepwise_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// TestEveryStepRecordsItsDuration runs sessions that produce a step of every
// kind on a clock that ticks 1ms per reading, and checks that each step
// records when its work started and how long it took (duration = finished -
// started, never 0), and that a sub-agent step spans its child run: it
// starts when the child run starts, not when it commits.
func TestEveryStepRecordsItsDuration(t *testing.T) {
	t.Parallel()
	var ticks atomic.Int64
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return t0.Add(time.Duration(ticks.Add(1)) * time.Millisecond) }

	var flakyCalls atomic.Int64
	flaky := tool.Func(llm.ToolDef{Name: "flaky", Description: "fails once", Parameters: []byte(`{"type":"object"}`)},
		func(ctx context.Context, c *tool.Call) (*tool.Result, error) {
			if flakyCalls.Add(1) == 1 {
				return nil, tool.Transient(errors.New("busy"))
			}
			return &tool.Result{Content: "fine"}, nil
		})
	model := &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		if req.Messages[len(req.Messages)-1].Role == "user" {
			return &llm.Response{ToolCalls: []stepwise.ToolCall{call("t1", "flaky", `{}`), call("t2", "helper", `{"input":"help"}`)}}, nil
		}
		return &llm.Response{Content: "all done"}, nil
	}}
	prep := stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
		return &stepwise.Next{Step: "decide", Output: "prepared", Input: &stepwise.InputRequest{Prompt: "go on?"}}, nil
	})
	decide := stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
		return &stepwise.Next{Step: stepwise.StepLLM, Decision: &stepwise.Decision{Purpose: "route", Options: []string{"llm", "end"}, Choice: "llm"}}, nil
	})
	helper := &stepwise.Agent{Name: "helper", Model: answer("helped")}
	timed := &stepwise.Agent{Name: "timed", Model: model, StartStep: "prep", Tools: []tool.Tool{flaky}, SubAgents: []*stepwise.Agent{helper},
		Steps: map[string]stepwise.Handler{"prep": prep, "decide": decide}, Retry: stepwise.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond}}
	// A budget of one token trims (and summarizes) the first turn when the
	// second one starts: a system step.
	trimmer := &stepwise.Agent{Name: "trimmer", Model: answer("short"), Context: stepwise.ContextPolicy{TokenBudget: 1, Strategy: "summarize"}}

	st := openSQLite(t)
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{timed, trimmer}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	r, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "timed", Input: "go"}))
	if err != nil {
		t.Fatal(err)
	}
	pend, err := e.Pending(ctx, r.ID)
	if err != nil || len(pend) != 1 {
		t.Fatalf("pending %v %d", err, len(pend))
	}
	if _, err := e.Answer(ctx, stepwise.AnswerParams{RunID: r.ID, RequestID: pend[0].RequestID, Answer: []byte(`"yes"`)}); err != nil {
		t.Fatal(err)
	}
	if r, err = e.Wait(ctx, e.Resume(ctx, r.ID)); err != nil || r.Status != steptype.RunCompleted {
		t.Fatalf("timed run: %v %+v", err, r)
	}
	t1, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "trimmer", Input: "first"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "trimmer", Input: "second", SessionID: t1.SessionID})); err != nil {
		t.Fatal(err)
	}

	all := append(steps(t, st, r.SessionID), steps(t, st, t1.SessionID)...)
	seen := map[steptype.Kind]bool{}
	for _, s := range all {
		seen[s.Kind] = true
		m := s.Metrics
		if m.StartedAt.IsZero() || m.FinishedAt.IsZero() {
			t.Fatalf("step %d %s: started %v finished %v", s.Sequence, s.Kind, m.StartedAt, m.FinishedAt)
		}
		if m.Duration <= 0 || m.Duration != m.FinishedAt.Sub(m.StartedAt) {
			t.Fatalf("step %d %s: duration %v, started %v, finished %v", s.Sequence, s.Kind, m.Duration, m.StartedAt, m.FinishedAt)
		}
		if s.Kind != steptype.KindAgent {
			continue
		}
		kids, err := st.RunList(ctx, &store.RunListParams{ParentRunID: s.RunID})
		if err != nil || len(kids) != 1 {
			t.Fatalf("child runs %v %d", err, len(kids))
		}
		if !m.StartedAt.Equal(kids[0].CreatedAt) {
			t.Fatalf("agent step started %v, its child run %v", m.StartedAt, kids[0].CreatedAt)
		}
		for _, c := range all {
			if c.RunID == kids[0].ID && (c.Metrics.StartedAt.Before(m.StartedAt) || c.Metrics.FinishedAt.After(m.FinishedAt)) {
				t.Fatalf("child step %d (%v..%v) outside its agent step (%v..%v)", c.Sequence, c.Metrics.StartedAt, c.Metrics.FinishedAt, m.StartedAt, m.FinishedAt)
			}
		}
	}
	for _, k := range []steptype.Kind{steptype.KindUser, steptype.KindLLM, steptype.KindTool, steptype.KindAgent, steptype.KindInput,
		steptype.KindDecision, steptype.KindCustom, steptype.KindError, steptype.KindSystem} {
		if !seen[k] {
			t.Errorf("no %s step was produced", k)
		}
	}
}
