package cli

import (
	"github.com/stepwise-run/stepwise/eval"
	"github.com/stepwise-run/stepwise/internal/agentload"
	"github.com/stepwise-run/stepwise/observe"
)

// observeAgents registers the binary's observation, from the agent
// files' observe sections and the events default of the command (on for
// serve, --events for run): the recorder of events inside steps, the
// summarizers of steps, and the evaluators run when a run ends — the
// default heuristics plus the judges of agents with on_run_end. It keeps
// every judge in r.judges for judging on demand.
func (r *runtime) observeAgents(events bool) error {
	obs := map[string]*agentload.Observed{}
	for _, l := range r.loaded {
		for name, o := range l.Observed {
			obs[name] = o
		}
	}
	record := func(agent string) bool {
		if o := obs[agent]; o != nil {
			return o.Events
		}
		return events
	}
	anyEvents := events
	for _, o := range obs {
		anyEvents = anyEvents || o.Events
	}
	if anyEvents {
		rec, err := observe.NewRecorder(observe.RecorderConfig{Store: r.st, Agent: record})
		if err != nil {
			return err
		}
		r.stop = append(r.stop, r.eng.Observe(rec))
	}
	r.judges = &eval.Judges{Store: r.st, Engine: r.eng, ByAgent: map[string][]eval.Evaluator{}}
	evaluators := eval.DefaultHeuristics()
	for name, o := range obs {
		if o.SummaryModel != nil {
			s, err := observe.NewSummarizer(observe.SummarizerConfig{Store: r.st, Model: o.SummaryModel, Agent: name,
				Kinds: o.SummaryKinds, Derive: true})
			if err != nil {
				return err
			}
			r.stop = append(r.stop, r.eng.Observe(s))
		}
		for _, j := range o.Judges {
			ev := eval.ForAgent(name, j)
			r.judges.ByAgent[name] = append(r.judges.ByAgent[name], ev)
			if o.JudgeOnRunEnd {
				evaluators = append(evaluators, ev)
			}
		}
	}
	runner, err := eval.NewRunner(eval.RunnerConfig{Store: r.st, Engine: r.eng, Evaluators: evaluators})
	if err != nil {
		return err
	}
	r.stop = append(r.stop, r.eng.Observe(runner))
	return nil
}
