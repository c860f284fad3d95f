package stepwise_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/tool"
)

// failingStore fails the append of the tool result of one call id.
type failingStore struct {
	store.Store
	callID string
}

var errInjected = errors.New("injected commit failure")

func (f *failingStore) StepAppend(ctx context.Context, p *store.StepAppendParams) ([]*stepwise.Step, error) {
	for _, s := range p.Steps {
		if s.ToolCallID == f.callID {
			return nil, errInjected
		}
	}
	return f.Store.StepAppend(ctx, p)
}

// TestFailedToolCommitCancelsSiblings fails the commit of one of three
// parallel tool calls and checks that the two others, still running, are
// cancelled at once instead of running on for results nobody can commit.
func TestFailedToolCommitCancelsSiblings(t *testing.T) {
	t.Parallel()
	var cancelled atomic.Int64
	entered := make(chan struct{}, 8)
	slow := tool.Func(llm.ToolDef{Name: "slow", Parameters: []byte(`{"type":"object"}`)}, func(ctx context.Context, c *tool.Call) (*tool.Result, error) {
		entered <- struct{}{}
		<-ctx.Done() // runs until cancelled
		cancelled.Add(1)
		return nil, ctx.Err()
	})
	quick := tool.Func(llm.ToolDef{Name: "quick", Parameters: []byte(`{"type":"object"}`)}, func(ctx context.Context, c *tool.Call) (*tool.Result, error) {
		// Finish once both siblings are running.
		for range 2 {
			<-entered
		}
		return &tool.Result{Content: "quick"}, nil
	})
	m := &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		return &llm.Response{ToolCalls: []stepwise.ToolCall{call("q", "quick", `{}`), call("s1", "slow", `{}`), call("s2", "slow", `{}`)}}, nil
	}}
	st := &failingStore{Store: memory.New(), callID: "q"}
	e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{{Name: "par", Model: m, Tools: []tool.Tool{quick, slow},
		Limits: stepwise.Limits{StepTimeout: time.Hour}, Retry: stepwise.RetryPolicy{MaxAttempts: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	done := make(chan *stepwise.Run, 1)
	go func() {
		r, err := e.Wait(context.Background(), e.Run(context.Background(), stepwise.StartParams{Agent: "par", Input: "go"}))
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	select {
	case r := <-done:
		if r == nil || r.Status != steptype.RunFailed || !strings.Contains(r.Error.Message, errInjected.Error()) {
			t.Fatalf("run %+v, want failed with the commit error", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the sibling calls kept running after a failed commit")
	}
	if n := cancelled.Load(); n != 2 {
		t.Fatalf("%d sibling calls cancelled, want 2", n)
	}
}
