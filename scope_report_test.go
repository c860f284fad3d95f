package stepwise_test

import (
	"context"
	"encoding/json"
	"iter"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// validationAgent runs two custom steps: "validate" reports progress,
// yields a typed value per field and streams a delta; "transform" reports
// nothing.
func validationAgent() *stepwise.Agent {
	return &stepwise.Agent{Name: "validator", StartStep: "validate", Steps: map[string]stepwise.Handler{
		"validate": stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
			for i, f := range []string{"email", "age"} {
				if err := s.Yield("validation.checking", map[string]string{"field": f}); err != nil {
					return nil, err
				}
				s.Emit("checked " + f + ";")
				s.Progress(float64(i+1)*0.2, "checking "+f)
			}
			return &stepwise.Next{Step: "transform", State: map[string]bool{"valid": true}}, nil
		}),
		"transform": stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
			return &stepwise.Next{Step: stepwise.StepEnd, Output: "ok"}, nil
		}),
	}}
}

func TestProgressAndYieldsOfCustomSteps(t *testing.T) {
	t.Parallel()
	e, st := newEngine(t, validationAgent())
	ctx := context.Background()
	var trail []string
	var run *stepwise.Run
	for ev, err := range e.Run(ctx, stepwise.StartParams{Agent: "validator", Input: "check"}) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case stepwise.EventStepYield:
			trail = append(trail, "yield:"+ev.Yield.Name+string(ev.Yield.Data))
		case stepwise.EventStepDelta:
			trail = append(trail, "delta:"+ev.Delta.Content)
		case stepwise.EventStepProgress:
			trail = append(trail, "progress:"+ev.Progress.Message)
		case stepwise.EventStepCompleted:
			trail = append(trail, "step:"+ev.Step.Name)
		}
		if ev.Run != nil {
			run = ev.Run
		}
	}
	want := `step:input yield:validation.checking{"field":"email"} delta:checked email; progress:checking email yield:validation.checking{"field":"age"} delta:checked age; progress:checking age step:validate step:transform`
	if got := strings.Join(trail, " "); got != want {
		t.Fatalf("event order:\n got %s\nwant %s", got, want)
	}
	if run.Status != steptype.RunCompleted {
		t.Fatalf("run %s", run.Status)
	}
	// The report is on the step that made it and carried by later steps.
	ss := steps(t, st, run.SessionID)
	if ss[0].Progress != nil {
		t.Fatalf("input step has progress %+v", ss[0].Progress)
	}
	for _, s := range ss[1:] {
		if s.Progress == nil || s.Progress.Fraction == nil || *s.Progress.Fraction != 0.4 || s.Progress.Message != "checking age" {
			t.Fatalf("step %s progress %+v", s.Name, s.Progress)
		}
	}
	// It survives the store round trip (wire format).
	got, err := st.StepGet(ctx, &store.StepGetParams{ID: ss[2].ID})
	if err != nil || got.Progress == nil || *got.Progress.Fraction != 0.4 {
		t.Fatalf("stored progress %+v %v", got, err)
	}
}

func TestContinuationCarriesReportedProgress(t *testing.T) {
	t.Parallel()
	e, _ := newEngine(t, validationAgent())
	ctx := context.Background()
	c := e.Client()
	inv, err := c.Initiate(ctx, "validator", "check")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		s, err := c.NextStep(ctx, inv)
		if err != nil {
			t.Fatal(err)
		}
		if cont, ok := s.(*stepwise.Continuation); ok {
			p := "none"
			if cont.Progress != nil {
				b, _ := json.Marshal(cont.Progress)
				p = string(b)
			}
			got = append(got, cont.Step.Name+"@"+p+"/"+cont.ProgressMessage)
			continue
		}
		if _, ok := s.(*stepwise.Result); !ok {
			t.Fatalf("final %T %+v", s, s)
		}
		break
	}
	// No fraction before any report — never steps ÷ max_steps.
	want := "input@none/ validate@0.4/checking age transform@0.4/checking age"
	if strings.Join(got, " ") != want {
		t.Fatalf("continuations:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}

// cutModel streams part of its answer and then fails with a transient
// error on its first call; the second call answers in full.
type cutModel struct{ calls int }

func (m *cutModel) Name() string { return "fake:cut" }

func (m *cutModel) Generate(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Response, error] {
	return func(yield func(*llm.Response, error) bool) {
		m.calls++
		if !yield(&llm.Response{Partial: true, Content: "The answ"}, nil) {
			return
		}
		if m.calls == 1 {
			yield(nil, &llm.Error{Class: steptype.ErrorTransient, StatusCode: 502, Code: "http_502", Message: "stream reset by peer"})
			return
		}
		if !yield(&llm.Response{Partial: true, Content: "er is 42"}, nil) {
			return
		}
		yield(&llm.Response{Content: "The answer is 42", FinishReason: "stop"}, nil)
	}
}

func TestStreamResetWhenAnAttemptFailsMidStream(t *testing.T) {
	t.Parallel()
	a := &stepwise.Agent{Name: "cut", Model: &cutModel{}, Retry: stepwise.RetryPolicy{MaxAttempts: 2, InitialInterval: 1, MaxInterval: 1}}
	e, _ := newEngine(t, a)
	ctx := context.Background()
	var trail []string
	text := ""
	for ev, err := range e.Run(ctx, stepwise.StartParams{Agent: "cut", Input: "q"}) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case stepwise.EventStepDelta:
			text += ev.Delta.Content
			trail = append(trail, "delta")
		case stepwise.EventStepReset:
			if ev.Reset.Attempt != 1 || !ev.Reset.Retrying || !strings.Contains(ev.Reset.Reason, "stream reset by peer") || ev.StepName != "llm" {
				t.Fatalf("reset %+v on %q", ev.Reset, ev.StepName)
			}
			text = "" // what a front end does
			trail = append(trail, "reset")
		case stepwise.EventStepCompleted:
			trail = append(trail, string(ev.Step.Kind))
		}
	}
	if got := strings.Join(trail, " "); got != "user delta reset error delta delta llm" {
		t.Fatalf("events: %s", got)
	}
	if text != "The answer is 42" {
		t.Fatalf("streamed text after reset: %q", text)
	}
}

func TestStreamResetNotSentWithoutDeltas(t *testing.T) {
	t.Parallel()
	n := 0
	m := &fakeModel{fn: func(*llm.Request) (*llm.Response, error) {
		if n++; n == 1 {
			return nil, &llm.Error{Class: steptype.ErrorTransient, StatusCode: 503, Code: "http_503"}
		}
		return &llm.Response{Content: "fine"}, nil
	}}
	e, _ := newEngine(t, &stepwise.Agent{Name: "plain", Model: m, Retry: stepwise.RetryPolicy{MaxAttempts: 2, InitialInterval: 1, MaxInterval: 1}})
	for ev, err := range e.Run(context.Background(), stepwise.StartParams{Agent: "plain", Input: "q"}) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == stepwise.EventStepReset {
			t.Fatal("reset without streamed output")
		}
	}
}

func TestCustomStepUsageAndNesting(t *testing.T) {
	t.Parallel()
	type seen struct {
		Depth  int                       `json:"depth"`
		Nested bool                      `json:"nested"`
		Parent *stepwise.ParentExecution `json:"parent"`
		Run    string                    `json:"parent_run_id"`
	}
	probe := stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
		// The step called a model itself.
		s.ReportUsage("scripted", llm.Usage{InputTokens: 1000, OutputTokens: 500})
		s.ReportUsage("scripted", llm.Usage{InputTokens: 200, OutputTokens: 100, CachedTokens: 100})
		s.ReportCost(0.25)
		return &stepwise.Next{Step: stepwise.StepEnd, Output: seen{Depth: s.Depth(), Nested: s.Nested(), Parent: s.Parent(), Run: s.ParentRunID()}}, nil
	})
	child := &stepwise.Agent{Name: "prober", StartStep: "probe", Steps: map[string]stepwise.Handler{"probe": probe}}
	root := &stepwise.Agent{Name: "root", Model: delegator("prober"), SubAgents: []*stepwise.Agent{child}, Steps: map[string]stepwise.Handler{"probe": probe}}
	e, st := newEngine(t, root, child)
	ctx := context.Background()
	run, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "root", Input: "go"}))
	if err != nil || run.Status != steptype.RunCompleted {
		t.Fatalf("%v %+v", err, run)
	}
	var custom, agentStep *stepwise.Step
	for _, s := range steps(t, st, run.SessionID) {
		switch s.Kind {
		case steptype.KindCustom:
			custom = s
		case steptype.KindAgent:
			agentStep = s
		}
	}
	if custom == nil || agentStep == nil {
		t.Fatal("no custom or agent step")
	}
	m := custom.Metrics
	// scripted prices: 1 $/M input, 2 $/M output, 0.1 $/M cached.
	wantCost := (1000*1.0+500*2.0)/1e6 + (100*1.0+100*0.1+100*2.0)/1e6 + 0.25
	if m.InputTokens != 1200 || m.OutputTokens != 600 || m.CachedTokens != 100 || m.Model != "scripted" || abs(m.Cost-wantCost) > 1e-12 {
		t.Fatalf("custom step metrics %+v, want cost %v", m, wantCost)
	}
	var got seen
	if err := json.Unmarshal(custom.Outputs, &got); err != nil {
		t.Fatal(err)
	}
	if got.Depth != 1 || !got.Nested || got.Parent == nil || got.Parent.RunID != run.ID || got.Parent.Agent != "root" ||
		got.Parent.StepID != agentStep.ID || got.Parent.Depth != 0 || got.Run != run.ID {
		t.Fatalf("nesting seen by the custom step: %+v (root run %s, agent step %s)", got, run.ID, agentStep.ID)
	}
	// The tokens count in the session's totals and in the summary.
	sess, err := st.SessionGet(ctx, &store.SessionGetParams{ID: run.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := e.Summarize(ctx, run.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if sess.InputTokens < 1200 || sum.InputTokens != sess.InputTokens || sum.Cost < wantCost || abs(sum.Cost-sess.Cost) > 1e-9 {
		t.Fatalf("session totals %d/%v, summary %d/%v", sess.InputTokens, sess.Cost, sum.InputTokens, sum.Cost)
	}
	// At the top level the scope says so.
	top, err := e.Wait(ctx, e.Run(ctx, stepwise.StartParams{Agent: "prober", Input: "alone"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps(t, st, top.SessionID) {
		if s.Kind == steptype.KindCustom {
			var g seen
			_ = json.Unmarshal(s.Outputs, &g)
			if g.Depth != 0 || g.Nested || g.Parent != nil {
				t.Fatalf("top-level scope: %+v", g)
			}
		}
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}
