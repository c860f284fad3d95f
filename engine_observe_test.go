package stepwise

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stepwise-run/stepwise/internal/observation"

	"github.com/stepwise-run/stepwise/internal/runexec"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/tool"
)

// recorder is an Observer that writes down what it is told.
type recorder struct {
	mu    sync.Mutex
	calls []string
	refs  []StepRef
	block chan struct{} // when set, every call waits on it
	// entered, when set, receives a value as a call starts waiting on block.
	entered chan struct{}
}

func (r *recorder) add(s string) {
	if r.block != nil {
		if r.entered != nil {
			r.entered <- struct{}{}
		}
		<-r.block
	}
	r.mu.Lock()
	r.calls = append(r.calls, s)
	r.mu.Unlock()
}

func (r *recorder) StepCommitted(_ context.Context, run *Run, s *Step) {
	r.add("step " + s.ID + " of " + run.ID)
}
func (r *recorder) RunFinished(_ context.Context, run *Run) {
	r.add("finished " + run.ID + " " + string(run.Status) + " " + run.Error.Message)
}
func (r *recorder) StepEvent(_ context.Context, ev *StepEvent) {
	r.mu.Lock()
	r.refs = append(r.refs, ev.StepRef)
	r.mu.Unlock()
	r.add(ev.Type + " " + ev.Name + " " + ev.Error)
}

func (r *recorder) got() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.calls, "\n")
}

func testEngine(t *testing.T) *Engine {
	t.Helper()
	e, err := New(Config{Store: memory.New(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestObserverOrderAndFlush(t *testing.T) {
	t.Parallel()
	e := testEngine(t)
	rec := &recorder{}
	stop := e.Observe(rec)
	x := e.newExec(nil, &Run{ID: "r1", SessionID: "s1", Status: steptype.RunCompleted})
	e.mu.Lock()
	e.active[x.Run.ID] = x
	e.mu.Unlock()
	e.runCommitHooks([]*Step{{ID: "a", RunID: "r1"}, {ID: "b", RunID: "r1"}}) // as commit does
	e.observeRunFinished(x.RunSnapshot(), &StepError{Message: "boom"})
	if err := e.FlushObservers(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := "step a of r1\nstep b of r1\nfinished r1 completed boom"
	if got := rec.got(); got != want {
		t.Errorf("observer saw:\n%s\nwant:\n%s", got, want)
	}
	stop()
	e.runCommitHooks([]*Step{{ID: "c", RunID: "r1"}})
	if err := e.FlushObservers(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := rec.got(); got != want {
		t.Errorf("after stop the observer saw:\n%s", got)
	}
}

func TestObserverFullQueueNeverBlocks(t *testing.T) {
	t.Parallel()
	e := testEngine(t)
	rec := &recorder{block: make(chan struct{}), entered: make(chan struct{}, observation.QueueSize+11)}
	stop := e.Observe(rec)
	// The first observation is taken by the observer, which then blocks.
	e.runCommitHooks([]*Step{{ID: "s", RunID: "r"}})
	<-rec.entered
	for i := 1; i < observation.QueueSize+10; i++ {
		e.runCommitHooks([]*Step{{ID: "s", RunID: "r"}}) // must return although nothing is consumed
	}
	st := e.observation(false)
	// One call is in flight, the queue is full, the rest is dropped.
	if d := st.Dropped(); d != 9 {
		t.Errorf("dropped %d observations, want 9", d)
	}
	close(rec.block)
	stop()
}

func TestMaskSteps(t *testing.T) {
	t.Parallel()
	e := testEngine(t)
	if err := e.maskSteps([]*Step{{ID: "a"}}); err != nil {
		t.Fatalf("no mask registered: %v", err)
	}
	e.Mask(func(s *Step) {
		s.Content = strings.ReplaceAll(s.Content, "secret", "[masked]")
		s.ID, s.Kind = "changed", steptype.KindError // identity is restored
	})
	e.Mask(func(s *Step) { s.Content += "!" })
	s := &Step{ID: "a", SessionID: "s", Kind: steptype.KindUser, Status: steptype.StepCompleted, Content: "my secret"}
	if err := e.maskSteps([]*Step{s}); err != nil {
		t.Fatal(err)
	}
	if s.Content != "my [masked]!" || s.ID != "a" || s.Kind != steptype.KindUser {
		t.Errorf("masked step = %+v", s)
	}
	in, err := e.maskInput("the secret")
	if err != nil || in != "the [masked]!" {
		t.Errorf("maskInput = %q, %v", in, err)
	}
	e.Mask(func(*Step) { panic("bug") })
	if err := e.maskSteps([]*Step{{ID: "b", Content: "secret"}}); err == nil || !strings.Contains(err.Error(), "mask function panicked") {
		t.Errorf("panicking mask: err = %v, want a failed commit", err)
	}
}

type stubModel struct{ fail bool }

func (stubModel) Name() string { return "stub:m" }

func (m stubModel) Generate(ctx context.Context, _ *llm.Request) iter.Seq2[*llm.Response, error] {
	return func(yield func(*llm.Response, error) bool) {
		if _, ok := StepRefFromContext(ctx); !ok {
			yield(nil, errors.New("no step in the model's context"))
			return
		}
		if m.fail {
			yield(nil, errors.New("rate limited"))
			return
		}
		if yield(&llm.Response{Partial: true, Content: "h"}, nil) {
			yield(&llm.Response{Content: "hi"}, nil)
		}
	}
}

type stubTool struct{}

func (stubTool) Definition() llm.ToolDef { return llm.ToolDef{Name: "t"} }

func (stubTool) Call(ctx context.Context, c *tool.Call) (*tool.Result, error) {
	if !RecordStepEvent(ctx, &StepEvent{Type: "api_call", Name: "GET /x"}) {
		return nil, errors.New("no step in the tool's context")
	}
	return &tool.Result{Content: "ok", Output: json.RawMessage(`{"v":1}`)}, nil
}

func TestObserveModelAndTool(t *testing.T) {
	t.Parallel()
	e := testEngine(t)
	x := e.newExec(nil, &Run{ID: "r", SessionID: "s"})
	step := &Step{ID: "llm-1", Name: StepLLM}
	step.Metrics.Attempt = 2
	if m := x.ObserveModel(stubModel{}, step); m != (stubModel{}) {
		t.Fatal("model wrapped although no observer records events")
	}
	if RecordStepEvent(t.Context(), &StepEvent{Type: "x"}) {
		t.Error("RecordStepEvent outside a step reported success")
	}
	rec := &recorder{}
	defer e.Observe(rec)()
	for _, m := range []llm.Model{stubModel{}, stubModel{fail: true}} {
		for _, err := range x.ObserveModel(m, step).Generate(t.Context(), &llm.Request{}) {
			_ = err
		}
	}
	res, err := runexec.CallTool(t.Context(), x.observeTool(stubTool{}), &tool.Call{ID: "call-1", Name: "t", SessionID: "s", RunID: "r", Attempt: 1})
	if err != nil || res.Content != "ok" {
		t.Fatalf("tool call = %v, %v", res, err)
	}
	if err := e.FlushObservers(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"provider_request stub:m ", "provider_response stub:m ",
		"provider_request stub:m ", "provider_response stub:m rate limited",
		"api_call GET /x ", "tool_invocation t ",
	}, "\n")
	if got := rec.got(); got != want {
		t.Errorf("events:\n%s\nwant:\n%s", got, want)
	}
	llmRef := StepRef{SessionID: "s", RunID: "r", StepID: "llm-1", StepName: StepLLM, Attempt: 2}
	toolRef := StepRef{SessionID: "s", RunID: "r", StepName: StepTools, ToolCallID: "call-1", Attempt: 1}
	if rec.refs[0] != llmRef || rec.refs[4] != toolRef || rec.refs[5] != toolRef {
		t.Errorf("refs = %+v", rec.refs)
	}
}

type nopObserver struct{}

func (nopObserver) StepCommitted(context.Context, *Run, *Step) {}
func (nopObserver) RunFinished(context.Context, *Run)          {}

// BenchmarkObserveCommit is the cost an observer adds to each commit on the
// run's goroutine: a run snapshot and a non-blocking queue send.
func BenchmarkObserveCommit(b *testing.B) {
	e, err := New(Config{Store: memory.New(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Observe(nopObserver{})()
	x := e.newExec(nil, &Run{ID: "r", SessionID: "s"})
	e.active["r"] = x
	steps := []*Step{{ID: "a", RunID: "r"}}
	b.ReportAllocs()
	for b.Loop() {
		e.runCommitHooks(steps)
	}
}
