package stepwise_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/store/sqlite"
	"github.com/stepwise-run/stepwise/tool"
)

// addAgent calls the tool "add" once, then answers with its result.
func addAgent(executed *atomic.Int64, bp *stepwise.Breakpoints) *stepwise.Agent {
	add := tool.Func(llm.ToolDef{Name: "add", Parameters: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *tool.Call) (*tool.Result, error) {
		executed.Add(1)
		return &tool.Result{Content: "3"}, nil
	})
	m := &fakeModel{fn: func(req *llm.Request) (*llm.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "tool" {
			return &llm.Response{Content: "the sum is " + last.Content}, nil
		}
		return &llm.Response{ToolCalls: []stepwise.ToolCall{call("c1", "add", `{"a":1,"b":2}`)}}, nil
	}}
	return &stepwise.Agent{Name: "adder", Model: m, Tools: []tool.Tool{add}, Breakpoints: bp}
}

// onlyPause returns the one pending request of the run, a breakpoint's.
func onlyPause(t *testing.T, e *stepwise.Engine, runID string) *stepwise.PendingInput {
	t.Helper()
	pend, err := e.Pending(context.Background(), runID)
	if err != nil || len(pend) != 1 || pend[0].Request.Breakpoint == nil {
		t.Fatalf("pending %v %d %+v", err, len(pend), pend)
	}
	return pend[0]
}

func answerPause(t *testing.T, e *stepwise.Engine, p *stepwise.PendingInput, a string) {
	t.Helper()
	if _, err := e.Answer(context.Background(), stepwise.AnswerParams{RunID: p.RunID, RequestID: p.RequestID, Answer: json.RawMessage(a)}); err != nil {
		t.Fatalf("answer %s: %v", a, err)
	}
}

func resume(t *testing.T, e *stepwise.Engine, runID string) *stepwise.Run {
	t.Helper()
	r, err := e.Wait(context.Background(), e.Execute(context.Background(), runID))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestBreakpointBeforeToolsStep(t *testing.T) {
	t.Parallel()
	var executed atomic.Int64
	e, st := newEngine(t, addAgent(&executed, nil))
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "adder", Input: "1+2", Breakpoints: &stepwise.Breakpoints{Before: []string{"tools"}}}))
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != steptype.RunWaiting || executed.Load() != 0 {
		t.Fatalf("status %s, tool executed %d times", run.Status, executed.Load())
	}
	p := onlyPause(t, e, run.ID)
	bp := p.Request.Breakpoint
	if bp.When != "before" || bp.Step != "tools" || bp.Kind != steptype.KindTool || bp.Matched != "tools" || len(bp.Tools) != 1 || bp.Tools[0] != "add" {
		t.Fatalf("pause %+v", bp)
	}
	// Bad answers change nothing.
	for _, bad := range []string{`"jump"`, `{"action":"later"}`, `{"state":[1]}`, `{"stat":{}}`, `7`} {
		if _, err := e.Answer(ctx, stepwise.AnswerParams{RunID: run.ID, RequestID: p.RequestID, Answer: json.RawMessage(bad)}); !errors.Is(err, stepwise.ErrInvalidAnswer) {
			t.Fatalf("answer %s: %v", bad, err)
		}
	}
	onlyPause(t, e, run.ID)
	answerPause(t, e, p, `"continue"`)
	run = resume(t, e, run.ID)
	if run.Status != steptype.RunCompleted || run.Output != "the sum is 3" || executed.Load() != 1 {
		t.Fatalf("status %s output %q executed %d", run.Status, run.Output, executed.Load())
	}
	// The pause is a step of the trace, out of the model's context.
	ss := steps(t, st, run.SessionID)
	if got := kinds(ss); len(got) != 5 || got[2] != "input" || ss[2].Name != "breakpoint" {
		t.Fatalf("steps %v", got)
	}
}

func TestBreakpointAfterToolName(t *testing.T) {
	t.Parallel()
	var executed atomic.Int64
	a := addAgent(&executed, nil)
	e, _ := newEngine(t, a)
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "adder", Input: "1+2", Breakpoints: &stepwise.Breakpoints{After: []string{"tool:add"}}}))
	if err != nil {
		t.Fatal(err)
	}
	model := a.Model.(*fakeModel)
	if run.Status != steptype.RunWaiting || executed.Load() != 1 || model.calls.Load() != 1 {
		t.Fatalf("status %s executed %d model calls %d", run.Status, executed.Load(), model.calls.Load())
	}
	p := onlyPause(t, e, run.ID)
	if bp := p.Request.Breakpoint; bp.When != "after" || bp.Step != "tools" || bp.Matched != "tool:add" {
		t.Fatalf("pause %+v", bp)
	}
	answerPause(t, e, p, `{}`)
	if run = resume(t, e, run.ID); run.Status != steptype.RunCompleted || model.calls.Load() != 2 {
		t.Fatalf("status %s model calls %d", run.Status, model.calls.Load())
	}
}

// A breakpoint by kind pauses before each model call; "step" pauses again
// before the next step whatever it is.
func TestBreakpointKindAndStepOnce(t *testing.T) {
	t.Parallel()
	var executed atomic.Int64
	e, _ := newEngine(t, addAgent(&executed, &stepwise.Breakpoints{Before: []string{"kind:llm"}}))
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "adder", Input: "1+2"}))
	if err != nil {
		t.Fatal(err)
	}
	var trail []string
	for run.Status == steptype.RunWaiting {
		p := onlyPause(t, e, run.ID)
		bp := p.Request.Breakpoint
		trail = append(trail, bp.When+" "+bp.Step+" "+bp.Matched)
		a := `"continue"`
		if len(trail) == 1 {
			a = `"step"`
		}
		answerPause(t, e, p, a)
		run = resume(t, e, run.ID)
	}
	want := []string{"before llm kind:llm", "before tools step", "before llm kind:llm"}
	if run.Status != steptype.RunCompleted || len(trail) != len(want) {
		t.Fatalf("status %s, pauses %q", run.Status, trail)
	}
	for i := range want {
		if trail[i] != want[i] {
			t.Fatalf("pauses %q, want %q", trail, want)
		}
	}
}

// A pause after the last step holds the run's completion until answered.
func TestBreakpointAfterLastStep(t *testing.T) {
	t.Parallel()
	m := &fakeModel{fn: func(*llm.Request) (*llm.Response, error) { return &llm.Response{Content: "hi"}, nil }}
	e, _ := newEngine(t, &stepwise.Agent{Name: "chat", Model: m})
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "chat", Input: "hello", Breakpoints: &stepwise.Breakpoints{After: []string{"llm"}}}))
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != steptype.RunWaiting {
		t.Fatalf("status %s", run.Status)
	}
	answerPause(t, e, onlyPause(t, e, run.ID), `"continue"`)
	if run = resume(t, e, run.ID); run.Status != steptype.RunCompleted || run.Output != "hi" {
		t.Fatalf("status %s output %q", run.Status, run.Output)
	}
}

// counterAgent's custom step "report" says the state's n; n has a sum
// reducer, which an edit at a breakpoint does not go through.
func counterAgent() *stepwise.Agent {
	report := stepwise.StepFunc(func(_ context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
		var st struct{ N int }
		if err := s.DecodeState(&st); err != nil {
			return nil, err
		}
		b, _ := json.Marshal(st.N)
		return &stepwise.Next{Step: stepwise.StepEnd, Content: "n=" + string(b)}, nil
	})
	return &stepwise.Agent{Name: "counter", StartStep: "report", Steps: map[string]stepwise.Handler{"report": report},
		Reducers: map[string]stepwise.Reducer{"n": stepwise.ReduceSum}, Breakpoints: &stepwise.Breakpoints{Before: []string{"report"}}}
}

func TestBreakpointEditState(t *testing.T) {
	t.Parallel()
	e, st := newEngine(t, counterAgent())
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "counter", Input: "go", State: map[string]any{"n": 1}}))
	if err != nil {
		t.Fatal(err)
	}
	p := onlyPause(t, e, run.ID)
	if bp := p.Request.Breakpoint; bp.Kind != steptype.KindCustom || string(bp.State) != `{"n":1}` {
		t.Fatalf("pause %+v state %s", bp, bp.State)
	}
	answerPause(t, e, p, `{"action":"continue","state":{"n":5,"note":"edited"}}`)
	run = resume(t, e, run.ID)
	if run.Status != steptype.RunCompleted || run.Output != "n=5" || string(run.State) != `{"n":5,"note":"edited"}` {
		t.Fatalf("status %s output %q state %s", run.Status, run.Output, run.State)
	}
	ss := steps(t, st, run.SessionID)
	var edit *stepwise.Step
	for _, s := range ss {
		if s.Kind == steptype.KindSystem && s.Name == "breakpoint" {
			edit = s
		}
	}
	if edit == nil || string(edit.StatePatch) != `{"n":5,"note":"edited"}` {
		t.Fatalf("no edit step in %v", kinds(ss))
	}
}

func TestBreakpointBadSelectorRefused(t *testing.T) {
	t.Parallel()
	e, _ := newEngine(t, counterAgent())
	ctx := context.Background()
	for _, sel := range []string{"", "kind:nope", "when:llm", "tool:"} {
		_, err := e.StartRun(ctx, stepwise.StartParams{Agent: "counter", Input: "go", Breakpoints: &stepwise.Breakpoints{Before: []string{sel}}})
		if !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("selector %q: %v", sel, err)
		}
	}
	if _, err := stepwise.New(stepwise.Config{Agents: []*stepwise.Agent{{Name: "x", StartStep: "end", Breakpoints: &stepwise.Breakpoints{After: []string{"kind:robot"}}}}}); err == nil {
		t.Fatal("an agent with a bad breakpoint registered")
	}
}

// A pause survives a restart: a new engine on the same SQLite file lists
// it, takes the answer (step once and an edit) and goes on from it.
func TestBreakpointSurvivesRestartSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bp.db")
	open := func() (*stepwise.Engine, store.Store) {
		st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		var executed atomic.Int64
		e, err := stepwise.New(stepwise.Config{Store: st, Agents: []*stepwise.Agent{addAgent(&executed, nil)}})
		if err != nil {
			t.Fatal(err)
		}
		return e, st
	}
	e, st := open()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "adder", Input: "1+2", Breakpoints: &stepwise.Breakpoints{Before: []string{"llm"}}}))
	if err != nil {
		t.Fatal(err)
	}
	_ = e.Close()
	_ = st.Close()

	e, st = open()
	defer func() { _ = e.Close(); _ = st.Close() }()
	p := onlyPause(t, e, run.ID)
	answerPause(t, e, p, `{"action":"step","state":{"checked":true}}`)
	run = resume(t, e, run.ID)
	// Stepping: the model was called, the run paused before the tools.
	p = onlyPause(t, e, run.ID)
	if bp := p.Request.Breakpoint; bp.Step != "tools" || bp.Matched != "step" || string(bp.State) != `{"checked":true}` {
		t.Fatalf("second pause %+v state %s", bp, bp.State)
	}
	_ = e.Close()
	_ = st.Close()

	e, st = open()
	answerPause(t, e, onlyPause(t, e, run.ID), `"continue"`)
	run = resume(t, e, run.ID)
	// "continue": the breakpoint on llm pauses before the second call.
	answerPause(t, e, onlyPause(t, e, run.ID), `"continue"`)
	if run = resume(t, e, run.ID); run.Status != steptype.RunCompleted || run.Output != "the sum is 3" {
		t.Fatalf("status %s output %q", run.Status, run.Output)
	}
}
