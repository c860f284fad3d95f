package eval_test

import (
	"context"
	"errors"
	"github.com/stepwise-run/stepwise/stepwisetest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/eval"
	"github.com/stepwise-run/stepwise/llm/scripted"
	"github.com/stepwise-run/stepwise/store"
)

// solver answers each question with the text of answers[question].
func solver(name string, answers map[string]string) *stepwise.Agent {
	var ut []scripted.UserTurn
	for q, a := range answers {
		ut = append(ut, scripted.UserTurn{Match: q, Turns: []scripted.Turn{{Text: a}}})
	}
	return &stepwise.Agent{Name: name, Model: scripted.New(name, scripted.Script{Strict: true, UserTurns: ut})}
}

func importQA(t *testing.T, st store.Store, name, data string) *store.Dataset {
	t.Helper()
	res, err := eval.ImportJSONL(t.Context(), st, strings.NewReader(data), eval.ImportParams{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return res.Dataset
}

const qa = `{"input":"q1: 2+2","expected":"4"}
{"input":"q2: 3+3","expected":"6"}
{"input":"q3: capital of France","expected":"Paris"}
{"input":"q4: no expectation"}
`

func TestExperimentsAndCompare(t *testing.T) {
	t.Parallel()
	stepwisetest.ForEachStore(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		e := stepwisetest.NewEngine(t, stepwise.Config{Store: st, Agents: []*stepwise.Agent{
			solver("v1", map[string]string{"q1": "4", "q2": "5", "q3": "paris", "q4": "?"}),
			solver("v2", map[string]string{"q1": "4", "q2": "6", "q3": "Lyon", "q4": "?"})}})
		ds := importQA(t, st, "qa", qa)
		a, err := eval.RunExperiment(ctx, eval.ExperimentConfig{Engine: e, Agent: "v1", Dataset: "qa", Name: "baseline", Concurrency: 2})
		if err != nil {
			t.Fatal(err)
		}
		b, err := eval.RunExperiment(ctx, eval.ExperimentConfig{Engine: e, Agent: "v2", Dataset: ds.ID, Name: "candidate",
			Evaluators: []eval.Evaluator{&eval.ExactMatch{}}})
		if err != nil {
			t.Fatal(err)
		}
		if a.Status != store.ExperimentCompleted || a.FinishedAt.IsZero() {
			t.Errorf("experiment = %+v", a)
		}
		var sum eval.Summary
		if err := jsonUnmarshal(a.Summary, &sum); err != nil {
			t.Fatal(err)
		}
		if sum.Items != 4 || sum.Completed != 4 || sum.Scores["exact_match"] != 2.0/3 || sum.Scores["error_rate"] != 1 || sum.OutputTokens == 0 {
			t.Errorf("summary = %+v", sum)
		}
		items, err := st.ExperimentItemList(ctx, &store.ExperimentItemListParams{ExperimentID: a.ID})
		if err != nil || len(items) != 4 {
			t.Fatalf("items = %v, %v", items, err)
		}
		if it := items[1]; it.Output != "5" || it.Scores["exact_match"] != 0 || it.RunID == "" || it.Status != "completed" {
			t.Errorf("item 1 = %+v", it)
		}
		if _, ok := items[3].Scores["exact_match"]; ok {
			t.Errorf("item without expectation was matched: %+v", items[3].Scores)
		}
		// The evals are on the item's run too.
		evs, _ := st.EvalList(ctx, &store.EvalListParams{RunID: items[0].RunID, Name: "exact_match"})
		if len(evs) != 1 || evs[0].Score != 1 {
			t.Errorf("exact_match eval of item 0's run = %+v", evs)
		}

		rep, err := eval.LoadReport(ctx, st, "baseline")
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Items) != 4 || rep.Summary.Items != 4 || rep.Items[1].Result.Output != "5" || rep.Dataset.Name != "qa" {
			t.Errorf("report = %+v", rep)
		}

		c, err := eval.Compare(ctx, st, "baseline", b.ID)
		if err != nil {
			t.Fatal(err)
		}
		var em *eval.MetricRow
		for i := range c.Metrics {
			if c.Metrics[i].Name == "exact_match" {
				em = &c.Metrics[i]
			}
		}
		if em == nil || *em.A != 2.0/3 || *em.B != 2.0/3 || em.Winner != "" {
			t.Errorf("exact_match row = %+v", em)
		}
		if len(c.Items) != 4 || !equalStrings(c.Items[1].Changed, []string{"error_rate", "exact_match", "repeated_state", "step_budget"}) {
			t.Errorf("item 1 changed = %v", c.Items[1].Changed)
		}
		var out strings.Builder
		if err := c.WriteTable(&out); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"dataset qa (4 items)", "A: baseline", "B: candidate", "exact_match", "success_rate", "4 of 4 items differ"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("table lacks %q:\n%s", want, out.String())
			}
		}

		importQA(t, st, "other", `{"input":"q1: 2+2"}`)
		x, err := eval.RunExperiment(ctx, eval.ExperimentConfig{Engine: e, Agent: "v1", Dataset: "other"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eval.Compare(ctx, st, a.ID, x.ID); !errors.Is(err, eval.ErrDifferentDatasets) {
			t.Errorf("different datasets: %v", err)
		}
		if _, err := eval.Compare(ctx, st, a.ID, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown experiment: %v", err)
		}
		if _, err := eval.RunExperiment(ctx, eval.ExperimentConfig{Engine: e, Agent: "v1", Dataset: "nope"}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown dataset: %v", err)
		}
		if _, err := eval.RunExperiment(ctx, eval.ExperimentConfig{Engine: e, Agent: "ghost", Dataset: "qa"}); !errors.Is(err, stepwise.ErrUnknownAgent) {
			t.Errorf("unknown agent: %v", err)
		}
	})
}

func TestExperimentConcurrencyIsBounded(t *testing.T) {
	t.Parallel()
	stepwisetest.ForEachStore(t, func(t *testing.T, st store.Store) {
		var active, peak atomic.Int64
		gate := make(chan struct{})
		work := stepwise.StepFunc(func(ctx context.Context, s *stepwise.Scope) (*stepwise.Next, error) {
			n := active.Add(1)
			defer active.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &stepwise.Next{Step: stepwise.StepEnd}, nil
		})
		e := stepwisetest.NewEngine(t, stepwise.Config{Store: st, Agents: []*stepwise.Agent{{Name: "w", StartStep: "work", Steps: map[string]stepwise.Handler{"work": work}}}})
		importQA(t, st, "six", strings.Repeat(`{"input":"x"}`+"\n", 6))
		done := make(chan error, 1)
		go func() {
			_, err := eval.RunExperiment(t.Context(), eval.ExperimentConfig{Engine: e, Agent: "w", Dataset: "six", Concurrency: 2})
			done <- err
		}()
		deadline := time.After(10 * time.Second)
		for active.Load() < 2 {
			select {
			case <-deadline:
				t.Fatal("two items never ran at once")
			case <-time.After(time.Millisecond):
			}
		}
		close(gate)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if p := peak.Load(); p != 2 {
			t.Errorf("peak concurrency %d, want 2", p)
		}
	})
}
