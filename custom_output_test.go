package stepwise_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// TestCustomStepsRunOutput: a run made only of custom steps ends with the
// content of its last step that has content — the run's output and the
// protocol's Result.Value — also when steps without content follow it and
// when the run parked for input in between (the output survives the
// resumed execution).
func TestCustomStepsRunOutput(t *testing.T) {
	t.Parallel()
	end := func(content string) stepwise.Handler {
		return stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
			return &stepwise.Next{Step: stepwise.StepEnd, Content: content}, nil
		})
	}
	to := func(next, content string, ask bool) stepwise.Handler {
		return stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
			n := &stepwise.Next{Step: next, Content: content}
			if ask {
				n.Input = &stepwise.InputRequest{Prompt: "ok?"}
			}
			return n, nil
		})
	}
	direct := &stepwise.Agent{Name: "direct", StartStep: "draft", Steps: map[string]stepwise.Handler{
		"draft": to("polish", "draft 1", false), "polish": end("the polished text")}}
	trailing := &stepwise.Agent{Name: "trailing", StartStep: "draft", Steps: map[string]stepwise.Handler{
		"draft": to("check", "draft 2", false), "check": end("")}}
	parking := &stepwise.Agent{Name: "parking", StartStep: "draft", Steps: map[string]stepwise.Handler{
		"draft": to("check", "draft 3", true), "check": end("")}}
	e, _ := newEngine(t, direct, trailing, parking)
	ctx := context.Background()
	c := e.Client()
	for _, tc := range []struct{ agent, want string }{{"direct", "the polished text"}, {"trailing", "draft 2"}, {"parking", "draft 3"}} {
		inv, err := c.Initiate(ctx, tc.agent, "go")
		if err != nil {
			t.Fatal(err)
		}
		var value *string
		for value == nil {
			step, err := c.NextStep(ctx, inv)
			if errors.Is(err, stepwise.ErrRunFinished) {
				t.Fatalf("%s: finished without a result", tc.agent)
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.agent, err)
			}
			switch s := step.(type) {
			case *stepwise.HumanInputRequest:
				if err := c.ProvideHumanInput(ctx, inv, s.RequestID, json.RawMessage(`"yes"`)); err != nil {
					t.Fatal(err)
				}
			case *stepwise.Result:
				value = &s.Value
			case *stepwise.Error:
				t.Fatalf("%s: %s", tc.agent, s.Message)
			}
		}
		if *value != tc.want {
			t.Errorf("%s: Result.Value %q, want %q", tc.agent, *value, tc.want)
		}
		run, err := e.Store().RunGet(ctx, &store.RunGetParams{ID: inv.RunID})
		if err != nil || run.Status != steptype.RunCompleted || run.Output != tc.want {
			t.Errorf("%s: run output %q (%v)", tc.agent, run.Output, err)
		}
	}
}
