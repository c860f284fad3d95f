package eval_test

import (
	"encoding/json"
	"errors"
	"github.com/stepwise-run/stepwise/stepwisetest"
	"math"
	"strings"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/eval"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

var rubric = eval.Rubric{Name: "quality", Criteria: []eval.Criterion{
	{Name: "correct", Description: "The answer is 4.", Weight: 3, Required: true},
	{Name: "polite", Description: "The answer is polite."},
}}

// judgeModel answers with text, but only when the prompt shows what the
// judge must see (the scripted guard fails the call otherwise).
func judgeModel(text string) *scripted.Model {
	return scripted.New("judge", scripted.Script{Strict: true, Turns: []scripted.Turn{{
		Match: "- correct (weight 3, required): The answer is 4.\n- polite (weight 1): The answer is polite.",
		Text:  text,
	}}})
}

func judgeInput() *eval.Input {
	return &eval.Input{
		Run: &stepwise.Run{ID: "r", Input: "what is 2+2?", Output: "4, sir", Status: steptype.RunCompleted},
		Steps: []*stepwise.Step{
			{Sequence: 1, Kind: steptype.KindUser, Role: steptype.RoleUser, Content: "what is 2+2?"},
			{Sequence: 2, Kind: steptype.KindLLM, Role: steptype.RoleAssistant, Content: "4, sir"},
		},
		Expected: "4",
	}
}

func TestJudge(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		answer       string
		score        float64
		label, descr string
	}{
		"all pass": {`{"criteria":[{"name":"correct","pass":true,"reason":"4"},{"name":"Polite","pass":true}]}`, 1, "pass", "2 of 2 criteria passed"},
		"fenced, optional fails": {"```json\n" + `{"criteria":[{"name":"correct","pass":true},{"name":"polite","pass":false,"reason":"curt"}]}` + "\n```",
			0.75, "pass", "1 of 2 criteria passed; failed: polite (curt)"},
		"required fails": {`{"criteria":[{"name":"correct","pass":false,"reason":"says 5"},{"name":"polite","pass":true}]}`, 0.25, "fail", "failed: correct (says 5)"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			j, err := eval.NewJudge(eval.JudgeConfig{Model: judgeModel(c.answer), Rubric: rubric})
			if err != nil {
				t.Fatal(err)
			}
			res, err := j.Evaluate(t.Context(), judgeInput())
			if err != nil {
				t.Fatal(err)
			}
			r := res[0]
			if len(res) != 1 || r.Score != c.score || r.Label != c.label || !strings.Contains(r.Description, c.descr) || r.Source != store.SourceLLMJudge {
				t.Errorf("result = %+v, want score %v label %s description %q", r, c.score, c.label, c.descr)
			}
			d, _ := json.Marshal(r.Details)
			if !strings.Contains(string(d), `"model":"scripted:judge"`) || !strings.Contains(string(d), `"name":"correct","weight":3,"required":true`) {
				t.Errorf("details = %s", d)
			}
		})
	}
}

func TestJudgeUnreadableVerdict(t *testing.T) {
	t.Parallel()
	for name, answer := range map[string]string{
		"prose":             "Looks good to me!",
		"missing criterion": `{"criteria":[{"name":"correct","pass":true}]}`,
		"no pass field":     `{"criteria":[{"name":"correct","pass":true},{"name":"polite","reason":"?"}]}`,
	} {
		j, err := eval.NewJudge(eval.JudgeConfig{Model: judgeModel(answer), Rubric: rubric})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Evaluate(t.Context(), judgeInput()); !errors.Is(err, eval.ErrVerdict) {
			t.Errorf("%s: err = %v, want ErrVerdict", name, err)
		}
	}
}

func TestRubricValidation(t *testing.T) {
	t.Parallel()
	m := judgeModel("")
	if _, err := eval.NewJudge(eval.JudgeConfig{Model: m, Rubric: eval.Rubric{Name: "empty"}}); !errors.Is(err, eval.ErrNoCriteria) {
		t.Errorf("no criteria: %v", err)
	}
	for name, r := range map[string]eval.Rubric{
		"duplicate":       {Criteria: []eval.Criterion{{Name: "a", Description: "x"}, {Name: "A", Description: "y"}}},
		"no name":         {Criteria: []eval.Criterion{{Description: "x"}}},
		"no description":  {Criteria: []eval.Criterion{{Name: "a"}}},
		"negative weight": {Criteria: []eval.Criterion{{Name: "a", Description: "x", Weight: -1}}},
		"NaN weight":      {Criteria: []eval.Criterion{{Name: "a", Description: "x", Weight: math.NaN()}}},
		"pass score":      {PassScore: 1.5, Criteria: []eval.Criterion{{Name: "a", Description: "x"}}},
	} {
		if _, err := eval.NewJudge(eval.JudgeConfig{Model: m, Rubric: r}); !errors.Is(err, eval.ErrRubric) {
			t.Errorf("%s: err = %v, want ErrRubric", name, err)
		}
	}
	if _, err := eval.NewJudge(eval.JudgeConfig{Rubric: rubric}); err == nil {
		t.Error("no model: no error")
	}
}

// The judge runs through the Runner like any evaluator and stores an
// llm-judge eval on the run.
func TestJudgeThroughRunner(t *testing.T) {
	t.Parallel()
	stepwisetest.ForEachStore(t, func(t *testing.T, st store.Store) {
		e := stepwisetest.NewEngine(t, stepwise.Config{Store: st, Agents: []*stepwise.Agent{{Name: "calc", Model: scripted.New("calc", scripted.Script{Strict: true, Turns: []scripted.Turn{{Text: "4, sir"}}})}}})
		r := run(t, e, "calc", "what is 2+2?")
		j, err := eval.NewJudge(eval.JudgeConfig{Model: judgeModel(`{"criteria":[{"name":"correct","pass":true},{"name":"polite","pass":true}]}`), Rubric: rubric})
		if err != nil {
			t.Fatal(err)
		}
		runner, err := eval.NewRunner(eval.RunnerConfig{Store: st, Evaluators: []eval.Evaluator{j}})
		if err != nil {
			t.Fatal(err)
		}
		evals, err := runner.EvaluateRun(t.Context(), r.ID)
		if err != nil || len(evals) != 1 || evals[0].Name != "quality" || evals[0].Source != store.SourceLLMJudge || evals[0].Score != 1 {
			t.Fatalf("evals = %+v, %v", evals, err)
		}
	})
}
