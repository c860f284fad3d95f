// Package eval evaluates what agents did (evaluations, datasets and
// experiments): evals with a score in [0, 1], a label, a
// description and a source, on steps, runs and sessions.
//
//   - User scores: Score.
//   - Heuristics run when a run ends (DefaultHeuristics): RepeatedState,
//     Loop, StepBudget, ErrorRate, ToolFailureStreak. Register a Runner as
//     an observer of the engine and every finished run is evaluated in the
//     background.
//   - The LLM judge: a Judge grades runs with any llm.Model against a
//     Rubric of weighted pass/fail criteria.
//   - Datasets (ImportJSONL) and experiments (RunExperiment: an agent over
//     a dataset with bounded concurrency, evaluated), compared side by side
//     with Compare.
//
// Everything is stored by a store implementing store.ObservationStore.
//
//	runner, _ := eval.NewRunner(eval.RunnerConfig{Store: st, Engine: e})
//	defer e.Observe(runner)()
//
//	judge, err := eval.NewJudge(eval.JudgeConfig{Model: model, Rubric: eval.Rubric{Criteria: []eval.Criterion{
//		{Name: "correct", Description: "The final answer is correct.", Weight: 2, Required: true},
//		{Name: "concise", Description: "The answer is at most three sentences."},
//	}}})
//
//	res, err := eval.ImportJSONL(ctx, st, file, eval.ImportParams{Name: "math"})
//	x, err := eval.RunExperiment(ctx, eval.ExperimentConfig{Engine: e, Agent: "solver", Dataset: "math",
//		Evaluators: append(eval.DefaultHeuristics(), &eval.ExactMatch{}, judge)})
//	cmp, err := eval.Compare(ctx, st, "baseline", x.Name)
//	cmp.WriteTable(os.Stdout)
package eval
