package stepwise_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// delegator calls the named sub-agents in parallel once, then reports.
func delegator(names ...string) *fakeModel {
	return &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		if req.Messages[len(req.Messages)-1].Role == "user" {
			var calls []stepwise.ToolCall
			for i, n := range names {
				calls = append(calls, call("s"+string(rune('0'+i)), n, `{"input":"task for `+n+`"}`))
			}
			return &llm.Response{ToolCalls: calls}, nil
		}
		var parts []string
		for _, m := range req.Messages {
			if m.Role == "tool" {
				parts = append(parts, m.ToolName+"="+m.Content)
			}
		}
		return &llm.Response{Content: strings.Join(parts, "; ")}, nil
	}}
}

func answer(text string) *fakeModel {
	return &fakeModel{fn: func(*llm.Request) (*llm.Response, error) { return &llm.Response{Content: text}, nil }}
}

func TestSubAgentsParallelAndNested(t *testing.T) {
	t.Parallel()
	broken := &fakeModel{fn: func(*llm.Request) (*llm.Response, error) {
		return nil, &llm.Error{Class: steptype.ErrorPermanent, StatusCode: 401, Code: "auth", Message: "bad key"}
	}}
	a := &stepwise.Agent{Name: "alpha", Model: answer("A done")}
	b := &stepwise.Agent{Name: "beta", Model: answer("B done")}
	c := &stepwise.Agent{Name: "gamma", Model: broken}
	root := &stepwise.Agent{Name: "root", Model: delegator("alpha", "beta", "gamma"), SubAgents: []*stepwise.Agent{a, b, c}}
	e, st := newEngine(t, root)
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "root", Input: "go"}))
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != steptype.RunCompleted {
		t.Fatalf("status %s %+v", run.Status, run.Error)
	}
	if !strings.Contains(run.Output, "alpha=A done") || !strings.Contains(run.Output, "beta=B done") || !strings.Contains(run.Output, "gamma=error: sub-agent gamma failed: llm: auth (HTTP 401): bad key") {
		t.Fatalf("output %q", run.Output)
	}
	ss := steps(t, st, run.SessionID)
	agentSteps := map[string]*stepwise.Step{}
	for _, s := range ss {
		if s.Kind == steptype.KindAgent {
			agentSteps[s.ID] = s
		}
	}
	if len(agentSteps) != 3 {
		t.Fatalf("agent steps: %d", len(agentSteps))
	}
	children := 0
	for _, s := range ss {
		if s.Hop == 1 && s.Kind == steptype.KindUser {
			children++
			if agentSteps[s.ParentID] == nil {
				t.Fatalf("child step %d does not link to its agent step", s.Sequence)
			}
		}
	}
	if children != 3 {
		t.Fatalf("child runs: %d", children)
	}
	// The parent's context holds only hop-0 messages.
	req, err := e.ContextPreview(ctx, run.SessionID, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range req.Messages {
		if strings.HasPrefix(m.Content, "task for") {
			t.Fatalf("child message leaked into the parent context: %+v", m)
		}
	}
}

func TestSubAgentCycleAndDepth(t *testing.T) {
	t.Parallel()
	// self calls itself: the cycle is refused as a tool error.
	self := &stepwise.Agent{Name: "self", Model: delegator("self")}
	self.SubAgents = []*stepwise.Agent{self}
	e, _ := newEngine(t, self)
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "self", Input: "go"}))
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != steptype.RunCompleted || !strings.Contains(run.Output, "sub-agent cycle") {
		t.Fatalf("status %s output %q", run.Status, run.Output)
	}
	// A chain deeper than MaxDepth stops with a depth error.
	leaf := &stepwise.Agent{Name: "l3", Model: answer("leaf")}
	l2 := &stepwise.Agent{Name: "l2", Model: delegator("l3"), SubAgents: []*stepwise.Agent{leaf}, Limits: stepwise.Limits{MaxDepth: 1}}
	l1 := &stepwise.Agent{Name: "l1", Model: delegator("l2"), SubAgents: []*stepwise.Agent{l2}}
	e2, _ := newEngine(t, l1)
	run, err = e2.Wait(ctx, e2.Run(ctx, stepwise.StartParams{Agent: "l1", Input: "go"}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(run.Output, "depth limit 1 (of agent l2) reached") {
		t.Fatalf("output %q", run.Output)
	}
}

// The root agent's max_depth bounds the whole chain, even when the nested
// agents allow more.
func TestRootMaxDepthBoundsNestedSubAgents(t *testing.T) {
	t.Parallel()
	c := &stepwise.Agent{Name: "c", Model: answer("leaf")}
	b := &stepwise.Agent{Name: "b", Model: delegator("c"), SubAgents: []*stepwise.Agent{c}, Limits: stepwise.Limits{MaxDepth: 10}}
	a := &stepwise.Agent{Name: "a", Model: delegator("b"), SubAgents: []*stepwise.Agent{b}, Limits: stepwise.Limits{MaxDepth: 10}}
	root := &stepwise.Agent{Name: "root", Model: delegator("a"), SubAgents: []*stepwise.Agent{a}, Limits: stepwise.Limits{MaxDepth: 2}}
	e, st := newEngine(t, root)
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "root", Input: "go"}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(run.Output, "depth limit 2 (of agent root) reached") {
		t.Fatalf("output %q", run.Output)
	}
	runs, err := st.RunList(ctx, &store.RunListParams{SessionID: run.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.Hop > 2 || r.Agent == "c" {
			t.Errorf("run of %s at hop %d: beyond the root's max_depth 2", r.Agent, r.Hop)
		}
	}
}
