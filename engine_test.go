package stepwise_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/tool"
)

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

func addTool() tool.Tool {
	return tool.New("add", "add two integers", func(ctx context.Context, a addArgs) (int, error) { return a.A + a.B, nil })
}

func TestRunParallelTools(t *testing.T) {
	t.Parallel()
	m := &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		if assistantTurns(req) == 0 {
			return &llm.Response{ToolCalls: []stepwise.ToolCall{call("c1", "add", `{"a":1,"b":2}`), call("c2", "add", `{"a":3,"b":4}`)},
				Usage: llm.Usage{InputTokens: 10, OutputTokens: 5}}, nil
		}
		var results []string
		for _, m := range req.Messages {
			if m.Role == "tool" {
				results = append(results, m.ToolCallID+"="+m.Content)
			}
		}
		slices.Sort(results)
		return &llm.Response{Content: "sums: " + strings.Join(results, ","), Usage: llm.Usage{InputTokens: 20, OutputTokens: 3}}, nil
	}}
	e, st := newEngine(t, &stepwise.Agent{Name: "calc", Model: m, Tools: []tool.Tool{addTool()}})
	var evTypes []stepwise.EventType
	var last stepwise.Position
	var run *stepwise.Run
	for ev, err := range e.Run(context.Background(), stepwise.StartParams{Agent: "calc", Input: "add things"}) {
		if err != nil {
			t.Fatal(err)
		}
		if !last.Less(ev.Position) {
			t.Fatalf("positions not increasing: %v then %v (%s)", last, ev.Position, ev.Type)
		}
		last = ev.Position
		evTypes = append(evTypes, ev.Type)
		if ev.Run != nil {
			run = ev.Run
		}
	}
	if run == nil || run.Status != steptype.RunCompleted {
		t.Fatalf("run = %+v", run)
	}
	if run.Output != "sums: c1=3,c2=7" {
		t.Fatalf("output = %q", run.Output)
	}
	ss := steps(t, st, run.SessionID)
	if got := strings.Join(kinds(ss), ","); got != "user,llm,tool,tool,llm" {
		t.Fatalf("kinds = %s", got)
	}
	for i, s := range ss {
		if s.Sequence != int64(i+1) {
			t.Fatalf("step %d has sequence %d", i, s.Sequence)
		}
	}
	if ss[1].Metrics.Cost != 0 || ss[1].Metrics.InputTokens != 10 {
		t.Fatalf("llm metrics = %+v", ss[1].Metrics)
	}
	if evTypes[0] != stepwise.EventRunStarted || evTypes[len(evTypes)-1] != stepwise.EventRunFinished {
		t.Fatalf("events = %v", evTypes)
	}
}

func TestCustomStepsStateAndDecision(t *testing.T) {
	t.Parallel()
	validate := stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
		var st struct{ Count int }
		if err := s.DecodeState(&st); err != nil {
			return nil, err
		}
		if st.Count < 2 {
			return &stepwise.Next{Step: "validate", State: map[string]any{"Count": st.Count + 1}, Output: map[string]int{"seen": st.Count}}, nil
		}
		return &stepwise.Next{Step: stepwise.StepEnd, Decision: &stepwise.Decision{Purpose: "enough?", Options: []string{"again", "stop"}, Choice: "stop"}}, nil
	})
	e, st := newEngine(t, &stepwise.Agent{Name: "counter", StartStep: "validate", Steps: map[string]stepwise.Handler{"validate": validate}})
	run, err := e.Wait(context.Background(), e.Run(context.Background(), stepwise.StartParams{Agent: "counter", Input: "go"}))
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != steptype.RunCompleted || string(run.State) != `{"Count":2}` {
		t.Fatalf("run = %s state %s", run.Status, run.State)
	}
	ss := steps(t, st, run.SessionID)
	if got := strings.Join(kinds(ss), ","); got != "user,custom,custom,decision" {
		t.Fatalf("kinds = %s", got)
	}
	if string(ss[1].StatePatch) != `{"Count":1}` {
		t.Fatalf("patch = %s", ss[1].StatePatch)
	}
}

func TestPanicAndTimeoutBecomeErrorSteps(t *testing.T) {
	t.Parallel()
	boom := stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) { panic("boom") })
	slow := stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	e, st := newEngine(t,
		&stepwise.Agent{Name: "panics", StartStep: "boom", Steps: map[string]stepwise.Handler{"boom": boom}},
		&stepwise.Agent{Name: "slow", StartStep: "slow", Steps: map[string]stepwise.Handler{"slow": slow},
			Limits: stepwise.Limits{StepTimeout: 10 * time.Millisecond}, Retry: stepwise.RetryPolicy{MaxAttempts: 2, InitialInterval: time.Millisecond}})
	run, err := e.Wait(context.Background(), e.Run(context.Background(), stepwise.StartParams{Agent: "panics"}))
	if err != nil {
		t.Fatal(err)
	}
	ss := steps(t, st, run.SessionID)
	if run.Status != steptype.RunFailed || ss[len(ss)-1].Kind != steptype.KindError || ss[len(ss)-1].Error.Code != "panic" {
		t.Fatalf("run %s, last step %+v", run.Status, ss[len(ss)-1].Error)
	}
	run, err = e.Wait(context.Background(), e.Run(context.Background(), stepwise.StartParams{Agent: "slow"}))
	if err != nil {
		t.Fatal(err)
	}
	ss = steps(t, st, run.SessionID)
	if got := strings.Join(kinds(ss), ","); got != "user,error,error" || ss[1].Error.Code != "timeout" || ss[2].Error.Attempt != 2 {
		t.Fatalf("kinds = %s, errors %+v %+v", got, ss[1].Error, ss[2].Error)
	}
}

func TestTransientModelErrorsRetried(t *testing.T) {
	t.Parallel()
	m := &fakeModel{}
	m.fn = func(req *llm.Request) (*llm.Response, error) {
		if m.calls.Load() <= 2 {
			return nil, &llm.Error{Class: steptype.ErrorTransient, StatusCode: 429, Code: "rate_limited", Message: "slow down"}
		}
		return &llm.Response{Content: "ok"}, nil
	}
	e, st := newEngine(t, &stepwise.Agent{Name: "flaky", Model: m, Retry: stepwise.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond}})
	run, err := e.Wait(context.Background(), e.Run(context.Background(), stepwise.StartParams{Agent: "flaky", Input: "hi"}))
	if err != nil {
		t.Fatal(err)
	}
	ss := steps(t, st, run.SessionID)
	if got := strings.Join(kinds(ss), ","); got != "user,error,error,llm" || run.Status != steptype.RunCompleted {
		t.Fatalf("kinds = %s status %s", got, run.Status)
	}
	if ss[1].Error.Class != steptype.ErrorTransient || ss[2].Error.Attempt != 2 || ss[3].Metrics.Attempt != 3 {
		t.Fatalf("errors: %+v %+v attempt %d", ss[1].Error, ss[2].Error, ss[3].Metrics.Attempt)
	}
	// A permanent error fails at once.
	m2 := &fakeModel{fn: func(*llm.Request) (*llm.Response, error) {
		return nil, &llm.Error{Class: steptype.ErrorPermanent, StatusCode: 400, Code: "bad_request", Message: "bad schema"}
	}}
	e2, st2 := newEngine(t, &stepwise.Agent{Name: "bad", Model: m2})
	run, err = e2.Wait(context.Background(), e2.Run(context.Background(), stepwise.StartParams{Agent: "bad", Input: "hi"}))
	if err != nil {
		t.Fatal(err)
	}
	ss = steps(t, st2, run.SessionID)
	if got := strings.Join(kinds(ss), ","); got != "user,error" || run.Status != steptype.RunFailed || !strings.Contains(run.Error.Message, "bad schema") {
		t.Fatalf("kinds = %s status %s err %+v", got, run.Status, run.Error)
	}
}

func TestMaxStepsAndUnknownAgent(t *testing.T) {
	t.Parallel()
	loop := stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
		return &stepwise.Next{Step: "loop"}, nil
	})
	e, _ := newEngine(t, &stepwise.Agent{Name: "loop", StartStep: "loop", Steps: map[string]stepwise.Handler{"loop": loop}, Limits: stepwise.Limits{MaxSteps: 5}})
	run, err := e.Wait(context.Background(), e.Run(context.Background(), stepwise.StartParams{Agent: "loop"}))
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != steptype.RunFailed || run.Error.Code != "max_steps" {
		t.Fatalf("run %s %+v", run.Status, run.Error)
	}
	_, err = e.StartRun(context.Background(), stepwise.StartParams{Agent: "nope"})
	if !errors.Is(err, stepwise.ErrUnknownAgent) {
		t.Fatalf("err = %v", err)
	}
	_, err = e.StartRun(context.Background(), stepwise.StartParams{Agent: "loop", SessionID: "missing"})
	if !errors.Is(err, stepwise.ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
	for _, err := range e.Execute(context.Background(), "missing") {
		if !errors.Is(err, stepwise.ErrNotFound) {
			t.Fatalf("err = %v", err)
		}
	}
}
