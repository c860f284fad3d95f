package eval

import "context"

// ForAgent returns an evaluator that applies ev to the runs of one agent
// only (and to no other run), under ev's name: how the judges declared in an
// agent file grade that agent's runs alone.
func ForAgent(agent string, ev Evaluator) Evaluator { return &forAgent{agent: agent, ev: ev} }

type forAgent struct {
	agent string
	ev    Evaluator
}

func (f *forAgent) Name() string { return f.ev.Name() }

func (f *forAgent) Evaluate(ctx context.Context, in *Input) ([]Result, error) {
	if in.Run == nil || in.Run.Agent != f.agent {
		return nil, nil
	}
	return f.ev.Evaluate(ctx, in)
}
