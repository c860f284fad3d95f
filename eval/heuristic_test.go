package eval_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/eval"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// toolStep is a tool result; err marks it failed.
func toolStep(seq int64, name, args, result string, err bool) *stepwise.Step {
	s := &stepwise.Step{ID: "t" + string(rune('a'+seq)), Sequence: seq, Kind: steptype.KindTool, Name: "tools",
		ToolName: name, Inputs: json.RawMessage(args), Content: result}
	if err {
		s.Error = &steptype.StepError{Message: result}
	}
	return s
}

func llmStep(seq int64, text string) *stepwise.Step {
	return &stepwise.Step{ID: "l" + string(rune('a'+seq)), Sequence: seq, Kind: steptype.KindLLM, Name: "llm", Content: text}
}

func input(steps ...*stepwise.Step) *eval.Input {
	return &eval.Input{Run: &stepwise.Run{ID: "r", StepCount: int64(len(steps)), Status: steptype.RunCompleted}, Steps: steps}
}

func evaluate(t *testing.T, ev eval.Evaluator, in *eval.Input) []eval.Result {
	t.Helper()
	res, err := ev.Evaluate(t.Context(), in)
	if err != nil {
		t.Fatalf("%s: %v", ev.Name(), err)
	}
	return res
}

func TestRepeatedState(t *testing.T) {
	t.Parallel()
	stuck := input(
		toolStep(1, "open", `{"url":"a"}`, "404", false), llmStep(2, "retry"),
		toolStep(3, "open", `{ "url" : "a" }`, "404", false), llmStep(4, "again"),
		toolStep(5, "open", `{"url":"a"}`, "404", false), toolStep(6, "open", `{"url":"b"}`, "ok", false),
	)
	res := evaluate(t, &eval.RepeatedState{}, stuck)
	if len(res) != 2 || res[0].Label != eval.LabelRepeated || res[0].Score != 4.0/6 ||
		!strings.Contains(res[0].Description, "seen 3 times (sequences 1, 3, 5)") {
		t.Fatalf("run result = %+v", res)
	}
	if res[1].TargetKind != store.TargetStep || res[1].TargetID != stuck.Steps[4].ID || res[1].Score != 0 {
		t.Errorf("step result = %+v, want the 3rd occurrence marked", res[1])
	}
	// A different result is a different state.
	fine := input(toolStep(1, "poll", `{}`, "pending", false), toolStep(2, "poll", `{}`, "pending 2", false), toolStep(3, "poll", `{}`, "done", false))
	if res := evaluate(t, &eval.RepeatedState{}, fine); len(res) != 1 || res[0].Label != eval.LabelOK || res[0].Score != 1 {
		t.Errorf("distinct states: %+v", res)
	}
	// Annotated states count, whatever the step.
	a := func(seq int64, state string) *stepwise.Step {
		return &stepwise.Step{ID: state + string(rune('0'+seq)), Sequence: seq, Kind: steptype.KindCustom, Name: "browse", Annotations: steptype.Annotations{State: state}}
	}
	if res := evaluate(t, &eval.RepeatedState{Threshold: 2}, input(a(1, "home"), a(2, "cart"), a(3, "home"))); res[0].Label != eval.LabelRepeated {
		t.Errorf("annotated states: %+v", res)
	}
	if res := evaluate(t, &eval.RepeatedState{}, input(&stepwise.Step{Kind: steptype.KindUser})); res != nil {
		t.Errorf("no observed state: %+v, want not applicable", res)
	}
}

func TestLoop(t *testing.T) {
	t.Parallel()
	a, b := func(seq int64) *stepwise.Step { return toolStep(seq, "search", `{"q":"x"}`, "r", false) },
		func(seq int64) *stepwise.Step { return toolStep(seq, "open", `{"id":1}`, "page", false) }
	loop := input(toolStep(1, "start", `{}`, "", false), a(2), llmStep(3, "hm"), b(4), a(5), b(6), a(7), b(8), a(9), b(10))
	res := evaluate(t, &eval.Loop{}, loop)
	if len(res) != 2 || res[0].Score != 0 || res[0].Label != eval.LabelLoop ||
		!strings.Contains(res[0].Description, `search({"q":"x"}) → open({"id":1})] repeated 4 times from sequence 2`) {
		t.Fatalf("loop = %+v", res)
	}
	if res[1].TargetID != loop.Steps[1].ID {
		t.Errorf("loop start marked on %s, want %s", res[1].TargetID, loop.Steps[1].ID)
	}
	if res := evaluate(t, &eval.Loop{}, input(a(1), b(2), a(3), b(4), toolStep(5, "done", `{}`, "", false))); res[0].Label != eval.LabelOK || res[0].Score != 1 {
		t.Errorf("two repetitions are no loop: %+v", res)
	}
	if res := evaluate(t, &eval.Loop{MinRepeats: 2}, input(a(1), b(2), a(3), b(4))); res[0].Label != eval.LabelLoop {
		t.Errorf("MinRepeats 2: %+v", res)
	}
}

func TestStepBudget(t *testing.T) {
	t.Parallel()
	in := input()
	in.Run.Error = &steptype.StepError{Message: "step budget of 10 steps exhausted", Code: "max_steps"}
	if res := evaluate(t, &eval.StepBudget{}, in); res[0].Score != 0 || res[0].Label != eval.LabelExhausted {
		t.Errorf("exhausted: %+v", res)
	}
	in = input()
	in.Run.StepCount, in.MaxSteps = 9, 10
	if res := evaluate(t, &eval.StepBudget{}, in); res[0].Score != 0.5 || res[0].Label != eval.LabelNearBudget {
		t.Errorf("near: %+v", res)
	}
	in.Run.StepCount = 3
	if res := evaluate(t, &eval.StepBudget{}, in); res[0].Score != 1 || res[0].Description != "3 of 10 steps used" {
		t.Errorf("fine: %+v", res)
	}
}

func TestErrorRate(t *testing.T) {
	t.Parallel()
	in := input(&stepwise.Step{Kind: steptype.KindUser}, llmStep(2, "x"), &stepwise.Step{Kind: steptype.KindError},
		toolStep(4, "t", `{}`, "boom", true), llmStep(5, "y"))
	res := evaluate(t, &eval.ErrorRate{}, in)
	if res[0].Score != 0.5 || res[0].Label != eval.LabelHighErrorRate || res[0].Description != "2 of 4 steps failed" {
		t.Errorf("error rate = %+v", res)
	}
	if res := evaluate(t, &eval.ErrorRate{Threshold: 0.6}, in); res[0].Label != eval.LabelOK {
		t.Errorf("under threshold: %+v", res)
	}
}

func TestToolFailureStreak(t *testing.T) {
	t.Parallel()
	f := func(seq int64) *stepwise.Step { return toolStep(seq, "api", `{}`, "500", true) }
	retry := &stepwise.Step{ID: "e", Sequence: 4, Kind: steptype.KindError, Name: "tools", ToolName: "api"}
	in := input(f(1), llmStep(2, "retry"), f(3), retry, toolStep(5, "api", `{}`, "ok", false), f(6))
	res := evaluate(t, &eval.ToolFailureStreak{}, in)
	if len(res) != 2 || res[0].Score != 0 || res[0].Label != eval.LabelFailureStreak || res[1].TargetID != "e" {
		t.Fatalf("streak = %+v", res)
	}
	res = evaluate(t, &eval.ToolFailureStreak{Threshold: 4}, in)
	if len(res) != 1 || res[0].Score != 1 || !strings.Contains(res[0].Description, "longest streak: 3") {
		t.Errorf("threshold 4: %+v", res)
	}
}
