package server

import (
	"context"
	"encoding/json"
	"iter"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/client"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/observe"
	"github.com/stepwise-run/stepwise/store/memory"
	"github.com/stepwise-run/stepwise/wire"
)

// checker is a custom step that validates fields: it yields a typed value
// per field, streams a delta, reports progress and the usage of a model
// call it made itself.
func checker(gate <-chan struct{}) *stepwise.Agent {
	return &stepwise.Agent{Name: "checker", StartStep: "validate", Steps: map[string]stepwise.Handler{
		"validate": stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
			select { // until the test's subscriber is attached
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			for i, f := range []string{"email", "age", "zip"} {
				if err := s.Yield("validation.checking", map[string]string{"field": f}); err != nil {
					return nil, err
				}
				s.Emit(f + " ")
				s.Progress(float64(i+1)/4, "checked "+f)
			}
			s.ReportUsage("scripted", llm.Usage{InputTokens: 4000, OutputTokens: 1000})
			return &stepwise.Next{Step: stepwise.StepEnd, Output: "valid"}, nil
		}),
	}}
}

// TestHTTPYieldsProgressUsage drives a custom step through the HTTP API:
// the SSE stream (Go client) carries its yields, deltas and progress in
// order, the long-poll continuation carries its progress, the step's events
// hold the yields, and the session summary counts its tokens.
func TestHTTPYieldsProgressUsage(t *testing.T) {
	t.Parallel()
	st := memory.New()
	gate := make(chan struct{})
	env := newObsEnv(t, st, func(e *stepwise.Engine) {
		rec, err := observe.NewRecorder(observe.RecorderConfig{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		e.Observe(rec)
	}, checker(gate))
	c, err := client.New(env.url)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	inv, err := c.Initiate(ctx, "checker", "check the form")
	if err != nil {
		t.Fatal(err)
	}
	var trail []string
	for ev, err := range c.Subscribe(ctx, stepwise.SubscribeParams{RunID: inv.RunID}) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case stepwise.EventStepYield:
			trail = append(trail, ev.Yield.Name+string(ev.Yield.Data))
		case stepwise.EventStepDelta:
			trail = append(trail, "delta:"+ev.Delta.Content)
		case stepwise.EventStepProgress:
			trail = append(trail, "progress:"+ev.Progress.Message)
		case stepwise.EventStepCompleted:
			trail = append(trail, "step:"+ev.Step.Name)
			if ev.Step.Name == "input" {
				close(gate)
			}
		}
	}
	want := `step:input validation.checking{"field":"email"} delta:email  progress:checked email validation.checking{"field":"age"} delta:age  progress:checked age validation.checking{"field":"zip"} delta:zip  progress:checked zip step:validate`
	if got := strings.Join(trail, " "); got != want {
		t.Fatalf("SSE order:\n got %s\nwant %s", got, want)
	}
	// The protocol: no fraction before any report, then the last one.
	var progress []string
	for {
		s, err := c.NextStep(ctx, inv)
		if err != nil {
			t.Fatal(err)
		}
		cont, ok := s.(*stepwise.Continuation)
		if !ok {
			break
		}
		p := "null"
		if cont.Progress != nil {
			b, _ := json.Marshal(*cont.Progress)
			p = string(b)
		}
		progress = append(progress, p+" "+cont.ProgressMessage)
	}
	if got := strings.Join(progress, "|"); got != "null |0.75 checked zip" {
		t.Fatalf("continuation progress %q", got)
	}
	if err := env.eng.FlushObservers(ctx); err != nil {
		t.Fatal(err)
	}
	steps := decode[struct {
		Steps []*stepwise.Step `json:"steps"`
	}](t, env.want(200, "", "GET", "/v1/sessions/"+inv.SessionID+"/steps", "", nil))
	var validate *stepwise.Step
	for _, s := range steps.Steps {
		if s.Name == "validate" {
			validate = s
		}
	}
	if validate == nil || validate.Metrics.InputTokens != 4000 || validate.Metrics.Cost <= 0 || validate.Progress == nil {
		t.Fatalf("validate step %+v", validate)
	}
	evs := decode[wire.StepEventList](t, env.want(200, "", "GET", "/v1/steps/"+validate.ID+"/events?type=yield", "", nil))
	var fields []string
	for _, ev := range evs.Events {
		fields = append(fields, ev.Name+string(ev.Payload))
	}
	if got := strings.Join(fields, " "); got != `validation.checking{"field":"email"} validation.checking{"field":"age"} validation.checking{"field":"zip"}` {
		t.Fatalf("recorded yields %s", got)
	}
	sum := decode[stepwise.Summary](t, env.want(200, "", "GET", "/v1/sessions/"+inv.SessionID+"/summary", "", nil))
	if sum.InputTokens != 4000 || sum.OutputTokens != 1000 || sum.Cost != validate.Metrics.Cost {
		t.Fatalf("summary %+v", sum)
	}
}

// TestHTTPStreamReset: a scripted provider stream cut mid-message by a 503,
// then retried: SSE subscribers get a step_reset before the retry's deltas.
func TestHTTPStreamReset(t *testing.T) {
	t.Parallel()
	m, err := scripted.Parse("cut.yaml", []byte("turns:\n  - {text: \"Hello there, friend\", chunk: 5, error: {status: 503, times: 1, after: 10}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	a := &stepwise.Agent{Name: "cut", Model: gatedModel{m, gate}, Retry: stepwise.RetryPolicy{MaxAttempts: 2, InitialInterval: 1, MaxInterval: 1}}
	env := newEnv(t, []*stepwise.Agent{a})
	ctx := t.Context()
	inv, err := env.c.Initiate(ctx, "cut", "hi")
	if err != nil {
		t.Fatal(err)
	}
	text := ""
	var trail []string
	for ev, err := range env.c.Subscribe(ctx, stepwise.SubscribeParams{RunID: inv.RunID}) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case stepwise.EventStepDelta:
			text += ev.Delta.Content
			trail = append(trail, ev.Delta.Content)
		case stepwise.EventStepReset:
			if ev.Reset.Attempt != 1 || !ev.Reset.Retrying {
				t.Fatalf("reset %+v", ev.Reset)
			}
			text = ""
			trail = append(trail, "RESET")
		case stepwise.EventStepCompleted:
			trail = append(trail, string(ev.Step.Kind))
			if ev.Step.Kind == "user" {
				close(gate)
			}
		}
	}
	if got := strings.Join(trail, "|"); got != "user|Hello| ther|RESET|error|Hello| ther|e, fr|iend|llm" {
		t.Fatalf("events %s", got)
	}
	if text != "Hello there, friend" {
		t.Fatalf("text %q", text)
	}
}

// gatedModel waits for gate before each call.
type gatedModel struct {
	llm.Model
	gate <-chan struct{}
}

func (g gatedModel) Generate(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Response, error] {
	return func(yield func(*llm.Response, error) bool) {
		select {
		case <-g.gate:
		case <-ctx.Done():
			yield(nil, ctx.Err())
			return
		}
		for r, err := range g.Model.Generate(ctx, req) {
			if !yield(r, err) {
				return
			}
		}
	}
}
