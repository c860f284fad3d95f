package observe

import (
	"context"
	"slices"

	"github.com/stepwise-run/stepwise/render"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
)

// wants reports whether the summarizer's filters select a step.
func (s *Summarizer) wants(run *stepwise.Run, step *stepwise.Step) bool {
	if len(s.cfg.Kinds) > 0 && !slices.Contains(s.cfg.Kinds, step.Kind) {
		return false
	}
	return s.cfg.Agent == "" || (run != nil && run.Agent == s.cfg.Agent)
}

// Derive returns the state, goal and action of a step for summarizing: the
// step's own annotations where set, else the goal is the run's task (its
// input), the state what the step was given (the previous step of the
// session, rendered as text) and the action what it did (the step
// rendered as text). Summaries already recorded are kept.
func Derive(ctx context.Context, st store.Store, run *stepwise.Run, step *stepwise.Step) stepwise.Annotations {
	a := step.Annotations
	if a.Goal == "" && run != nil {
		a.Goal = run.Input
	}
	if a.Action == "" {
		a.Action = render.Steps([]*stepwise.Step{step})
	}
	if a.State == "" && step.Sequence > 1 {
		prev, err := st.StepGet(ctx, &store.StepGetParams{SessionID: step.SessionID, Sequence: step.Sequence - 1})
		if err == nil {
			a.State = render.Steps([]*stepwise.Step{prev})
		}
	}
	return a
}
