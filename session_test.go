package stepwise_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// echoModel calls tool "a", then tool "b", then answers with what it saw.
func echoModel() *fakeModel {
	return &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		var n int
		var seen []string
		for _, m := range req.Messages {
			if m.Role == "user" {
				n = 0
				seen = nil
			}
			if m.Role == "assistant" {
				n++
			}
			if m.Role == "tool" {
				seen = append(seen, m.Content)
			}
		}
		switch n {
		case 0:
			return &llm.Response{ToolCalls: []stepwise.ToolCall{call("a1", "a", `{"x":1}`)}}, nil
		case 1:
			return &llm.Response{ToolCalls: []stepwise.ToolCall{call("b1", "b", `{"y":2}`)}}, nil
		}
		return &llm.Response{Content: "saw " + strings.Join(seen, "+")}, nil
	}}
}

func constTool(name, out string) tool.Tool {
	return tool.Func(llm.ToolDef{Name: name, Parameters: []byte(`{"type":"object"}`)}, func(ctx context.Context, c *tool.Call) (*tool.Result, error) {
		return &tool.Result{Content: out}, nil
	})
}

func TestReplayReusesUntilDivergence(t *testing.T) {
	t.Parallel()
	m := echoModel()
	e, st := newEngine(t, &stepwise.Agent{Name: "rec", Model: m, Tools: []tool.Tool{constTool("a", "A1"), constTool("b", "B1")}})
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "rec", Input: "go"}))
	if err != nil || run.Output != "saw A1+B1" {
		t.Fatalf("run %v %+v", err, run)
	}
	if m.calls.Load() != 3 {
		t.Fatalf("model calls = %d", m.calls.Load())
	}
	// Change tool b's implementation and replay with b live.
	m.calls.Store(0)
	if err := e.Register(&stepwise.Agent{Name: "rec", Model: m, Tools: []tool.Tool{constTool("a", "A1"), constTool("b", "B2")}}); err != nil {
		t.Fatal(err)
	}
	last, err := e.ReplayAll(ctx, stepwise.ReplayParams{SessionID: run.SessionID, LiveTools: []string{"b"}})
	if err != nil {
		t.Fatal(err)
	}
	if last.Output != "saw A1+B2" {
		t.Fatalf("replayed output %q", last.Output)
	}
	if got := m.calls.Load(); got != 1 {
		t.Fatalf("model called %d times during replay, want 1 (only after b's output changed)", got)
	}
	ss := steps(t, st, last.SessionID)
	var marks []string
	for _, s := range ss[1:] {
		marks = append(marks, string(s.Kind)+":"+s.Replay)
	}
	if got := strings.Join(marks, ","); got != "llm:reused,tool:reused,llm:reused,tool:live,llm:live" {
		t.Fatalf("replay marks = %s", got)
	}
	// The original session is unchanged.
	if n := len(steps(t, st, run.SessionID)); n != 6 {
		t.Fatalf("original has %d steps", n)
	}
	// Replaying with an agent that lacks a recorded tool is refused.
	_ = e.Register(&stepwise.Agent{Name: "notools", Model: m})
	if _, err := e.Replay(ctx, stepwise.ReplayParams{SessionID: run.SessionID, Agent: "notools"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("replay without tools: %v", err)
	}
}

func TestForkEditRetryTruncate(t *testing.T) {
	t.Parallel()
	m := echoModel()
	e, st := newEngine(t, &stepwise.Agent{Name: "f", Model: m, Tools: []tool.Tool{constTool("a", "A"), constTool("b", "B")}})
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "f", Input: "first"}))
	if err != nil {
		t.Fatal(err)
	}
	sid := run.SessionID
	// Fork at 3, then a fork of the fork, with an edit.
	f1, err := e.Fork(ctx, stepwise.ForkParams{SessionID: sid, At: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(steps(t, st, f1.ID)); got != 3 {
		t.Fatalf("fork sees %d steps", got)
	}
	edit := "edited question"
	f2, err := e.Fork(ctx, stepwise.ForkParams{SessionID: f1.ID, At: 1, Edit: &edit})
	if err != nil {
		t.Fatal(err)
	}
	ss := steps(t, st, f2.ID)
	if len(ss) != 1 || ss[0].Content != "edited question" || ss[0].Sequence != 1 {
		t.Fatalf("edited fork = %+v", ss)
	}
	for _, bad := range []int64{0, 99} {
		if _, err := e.Fork(ctx, stepwise.ForkParams{SessionID: sid, At: bad}); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("fork at %d: %v", bad, err)
		}
	}
	if _, err := e.Fork(ctx, stepwise.ForkParams{SessionID: "nope", At: 1}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("fork unknown: %v", err)
	}
	// Truncating under the fork is refused; nothing changes.
	if _, err := e.Truncate(ctx, sid, 2); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("truncate under fork: %v", err)
	}
	if got := len(steps(t, st, sid)); got != 6 {
		t.Fatalf("after refused truncate: %d steps", got)
	}
	// Non-destructive retry from the final llm step.
	r, err := e.Retry(ctx, stepwise.RetryParams{SessionID: sid, From: 6})
	if err != nil {
		t.Fatal(err)
	}
	r, err = e.Wait(ctx, e.Execute(ctx, r.ID))
	if err != nil || r.Status != steptype.RunCompleted || r.SessionID == sid {
		t.Fatalf("retry: %v %+v", err, r)
	}
	if got := strings.Join(kinds(steps(t, st, r.SessionID)), ","); got != "user,llm,tool,llm,tool,llm" {
		t.Fatalf("retry kinds = %s", got)
	}
	tree, err := e.Tree(ctx, f1.ID)
	if err != nil || tree.Session.ID != sid || len(tree.Forks) != 2 {
		t.Fatalf("tree: %v %+v", err, tree)
	}
	sum, err := e.Summarize(ctx, sid)
	if err != nil || sum.TotalSteps != 6 || sum.ByKind[steptype.KindTool] != 2 || sum.Forks != 2 || sum.SequenceRange != [2]int64{1, 6} {
		t.Fatalf("summary: %v %+v", err, sum)
	}
	if _, err := e.Retry(ctx, stepwise.RetryParams{SessionID: "missing", From: 1}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("retry unknown: %v", err)
	}
}

func TestMultiTurnContextAndBudget(t *testing.T) {
	t.Parallel()
	var lastReq *llm.Request
	m := &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		lastReq = req
		return &llm.Response{Content: strings.Repeat("x", 500)}, nil
	}}
	e, st := newEngine(t, &stepwise.Agent{Name: "chat", Model: m, Instructions: "be brief", Context: stepwise.ContextPolicy{TokenBudget: 250}})
	ctx := context.Background()
	r1, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "chat", Input: "one"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"two", "three"} {
		if _, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "chat", Input: in, SessionID: r1.SessionID})); err != nil {
			t.Fatal(err)
		}
	}
	if lastReq.System != "be brief" || lastReq.Messages[len(lastReq.Messages)-1].Content != "three" {
		t.Fatalf("request = %+v", lastReq)
	}
	if len(lastReq.Messages) >= 5 {
		t.Fatalf("budget not applied: %d messages", len(lastReq.Messages))
	}
	var trims int
	for _, s := range steps(t, st, r1.SessionID) {
		if s.Kind == steptype.KindSystem && s.Name == "context" {
			trims++
		}
	}
	if trims == 0 {
		t.Fatal("trim not recorded in the log")
	}
	prev, err := e.ContextPreview(ctx, r1.SessionID, "")
	if err != nil || len(prev.Messages) == 0 || len(prev.Messages) >= 6 {
		t.Fatalf("preview: %v %d", err, len(prev.Messages))
	}
}

func TestContextSummarizeStrategy(t *testing.T) {
	t.Parallel()
	m := &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		if strings.HasPrefix(req.System, "Summarize") {
			return &llm.Response{Content: "SUMMARY: the user counted"}, nil
		}
		return &llm.Response{Content: strings.Repeat("y", 500)}, nil
	}}
	e, st := newEngine(t, &stepwise.Agent{Name: "sum", Model: m, Context: stepwise.ContextPolicy{TokenBudget: 250, Strategy: "summarize"}})
	ctx := context.Background()
	r, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "sum", Input: "one"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"two", "three"} {
		if _, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "sum", Input: in, SessionID: r.SessionID})); err != nil {
			t.Fatal(err)
		}
	}
	var rec *stepwise.Step
	for _, s := range steps(t, st, r.SessionID) {
		if s.Kind == steptype.KindSystem {
			rec = s
		}
	}
	if rec == nil || rec.Content != "SUMMARY: the user counted" {
		t.Fatalf("summary step %+v", rec)
	}
	prev, err := e.ContextPreview(ctx, r.SessionID, "")
	if err != nil || !strings.Contains(prev.Messages[0].Content, "SUMMARY: the user counted") {
		t.Fatalf("preview starts with %+v (%v)", prev.Messages[0], err)
	}
}

func TestUnknownToolAndBadArguments(t *testing.T) {
	t.Parallel()
	m := &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		if assistantTurns(req) == 0 {
			return &llm.Response{ToolCalls: []stepwise.ToolCall{call("u1", "nope", `{}`), call("b1", "add", `{"a":"x"}`)}}, nil
		}
		var out []string
		for _, msg := range req.Messages {
			if msg.Role == "tool" {
				out = append(out, msg.Content)
			}
		}
		return &llm.Response{Content: strings.Join(out, " | ")}, nil
	}}
	e, st := newEngine(t, &stepwise.Agent{Name: "t", Model: m, Tools: []tool.Tool{addTool()}})
	ctx := context.Background()
	r, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "t", Input: "go"}))
	if err != nil || r.Status != steptype.RunCompleted {
		t.Fatalf("%v %+v", err, r)
	}
	if !strings.Contains(r.Output, `unknown tool "nope"`) || !strings.Contains(r.Output, "invalid arguments") {
		t.Fatalf("the model did not see both errors: %q", r.Output)
	}
	for _, s := range steps(t, st, r.SessionID) {
		if s.Kind == steptype.KindTool && s.Error == nil {
			t.Fatalf("tool step %d has no error", s.Sequence)
		}
	}
}
