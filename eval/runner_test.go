package eval_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/stepwise-run/stepwise/stepwisetest"
	"math"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/eval"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// flaky is a tool that always fails.
type flaky struct{}

func (flaky) Definition() llm.ToolDef {
	return llm.ToolDef{Name: "fetch", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (flaky) Call(context.Context, *tool.Call) (*tool.Result, error) {
	return &tool.Result{Content: "error: upstream down", IsError: true}, nil
}

// A stuck agent: the model calls the failing tool with the same arguments
// until the step budget runs out.
func stuckAgent() *stepwise.Agent {
	return &stepwise.Agent{Name: "stuck", Model: scripted.Loop("fetch", `{"url":"x"}`, 100, "never"),
		Tools: []stepwise.Tool{flaky{}}, Limits: stepwise.Limits{MaxSteps: 12}}
}

func TestRunnerEvaluatesStuckRun(t *testing.T) {
	t.Parallel()
	stepwisetest.ForEachStore(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		e := stepwisetest.NewEngine(t, stepwise.Config{Store: st, Agents: []*stepwise.Agent{stuckAgent()}})
		r := run(t, e, "stuck", "get x")
		if r.Status != steptype.RunFailed || r.Error.Code != "max_steps" {
			t.Fatalf("run = %s %+v, want failed on the step budget", r.Status, r.Error)
		}
		runner, err := eval.NewRunner(eval.RunnerConfig{Store: st, Engine: e})
		if err != nil {
			t.Fatal(err)
		}
		evals, err := runner.EvaluateRun(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{}
		for _, ev := range evals {
			if ev.TargetKind == store.TargetRun {
				labels[ev.Name] = ev.Label
				if ev.Source != store.SourceHeuristic || ev.SessionID != r.SessionID || ev.RunID != r.ID {
					t.Errorf("eval %s = %+v", ev.Name, ev)
				}
			}
		}
		want := map[string]string{"repeated_state": eval.LabelRepeated, "loop": eval.LabelLoop, "step_budget": eval.LabelExhausted,
			"error_rate": eval.LabelHighErrorRate, "tool_failure_streak": eval.LabelFailureStreak}
		for name, label := range want {
			if labels[name] != label {
				t.Errorf("%s label = %q, want %q (all: %v)", name, labels[name], label, labels)
			}
		}
		// Evaluating again replaces the evals.
		if _, err := runner.EvaluateRun(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		stored, err := st.EvalList(ctx, &store.EvalListParams{RunID: r.ID})
		if err != nil || len(stored) != len(evals) {
			t.Errorf("%d evals stored after two evaluations, want %d (%v)", len(stored), len(evals), err)
		}
	})
}

func TestScore(t *testing.T) {
	t.Parallel()
	stepwisetest.ForEachStore(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		e := stepwisetest.NewEngine(t, stepwise.Config{Store: st, Agents: []*stepwise.Agent{{Name: "echo", Model: scripted.New("echo", scripted.Script{Strict: true, Turns: []scripted.Turn{{Text: "hi"}}})}}})
		r := run(t, e, "echo", "hello")
		steps, _ := st.StepList(ctx, &store.StepListParams{RunID: r.ID})
		for _, p := range []eval.ScoreParams{
			{TargetKind: store.TargetStep, TargetID: steps[1].ID, Score: 1, Label: "good", Author: "ann"},
			{TargetKind: store.TargetRun, TargetID: r.ID, Name: "helpful", Score: 0.5},
			{TargetKind: store.TargetSession, TargetID: r.SessionID, Score: 0},
		} {
			ev, err := eval.Score(ctx, st, p)
			if err != nil {
				t.Fatalf("Score(%+v): %v", p, err)
			}
			if ev.Source != store.SourceUser || ev.SessionID != r.SessionID {
				t.Errorf("user eval = %+v", ev)
			}
		}
		for name, c := range map[string]struct {
			p    eval.ScoreParams
			want error
		}{
			"above 1":        {eval.ScoreParams{TargetKind: store.TargetRun, TargetID: r.ID, Score: 1.5}, store.ErrInvalid},
			"negative":       {eval.ScoreParams{TargetKind: store.TargetRun, TargetID: r.ID, Score: -0.01}, store.ErrInvalid},
			"NaN":            {eval.ScoreParams{TargetKind: store.TargetRun, TargetID: r.ID, Score: math.NaN()}, store.ErrInvalid},
			"unknown kind":   {eval.ScoreParams{TargetKind: "tool", TargetID: r.ID, Score: 1}, store.ErrInvalid},
			"unknown target": {eval.ScoreParams{TargetKind: store.TargetStep, TargetID: "nope", Score: 1}, store.ErrNotFound},
		} {
			if _, err := eval.Score(ctx, st, c.p); !errors.Is(err, c.want) {
				t.Errorf("%s: err = %v, want %v", name, err, c.want)
			}
		}
		all, _ := st.EvalList(ctx, &store.EvalListParams{SessionID: r.SessionID})
		if len(all) != 3 {
			t.Errorf("%d evals stored, want 3 (bad input stores nothing)", len(all))
		}
		if _, err := eval.Score(ctx, nil, eval.ScoreParams{TargetKind: store.TargetRun, TargetID: r.ID, Score: 1}); !errors.Is(err, eval.ErrNoStore) {
			t.Errorf("no store: %v", err)
		}
	})
}
