package eval_test

import (
	"github.com/stepwise-run/stepwise/stepwisetest"
	"testing"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/eval"
	"github.com/stepwise-run/stepwise/store"
)

// Registered as an observer, the runner evaluates every run when it ends,
// without being asked.
func TestRunnerEvaluatesRunsWhenTheyEnd(t *testing.T) {
	t.Parallel()
	stepwisetest.ForEachStore(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		e := stepwisetest.NewEngine(t, stepwise.Config{Store: st, Agents: []*stepwise.Agent{stuckAgent()}})
		runner, err := eval.NewRunner(eval.RunnerConfig{Store: st, Engine: e})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Observe(runner)()
		r := run(t, e, "stuck", "get x")
		if err := e.FlushObservers(ctx); err != nil {
			t.Fatal(err)
		}
		evs, err := st.EvalList(ctx, &store.EvalListParams{TargetKind: store.TargetRun, TargetID: r.ID, Name: "step_budget"})
		if err != nil || len(evs) != 1 || evs[0].Label != eval.LabelExhausted {
			t.Fatalf("step_budget eval = %+v, %v", evs, err)
		}
		// A cancelled run is evaluated too.
		started, err := e.StartRun(ctx, stepwise.StartParams{Agent: "stuck", Input: "again"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Cancel(ctx, started.ID, "no"); err != nil {
			t.Fatal(err)
		}
		if err := e.FlushObservers(ctx); err != nil {
			t.Fatal(err)
		}
		evs, _ = st.EvalList(ctx, &store.EvalListParams{TargetKind: store.TargetRun, TargetID: started.ID})
		if len(evs) == 0 {
			t.Error("cancelled run not evaluated")
		}
	})
}
