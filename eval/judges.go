package eval

import (
	"context"
	"errors"
	"fmt"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
)

// ErrNoJudge: the agent of a run has no judge (observe.judge in its agent
// file).
var ErrNoJudge = errors.New("stepwise: no judge configured")

// Judges are the LLM judges of each agent, for judging runs on demand
// (stepwise eval judge, POST /v1/runs/{id}/judge); the same evaluators,
// registered with a Runner, judge runs when they end.
type Judges struct {
	// Store keeps the evals; it must implement store.ObservationStore.
	Store store.Store
	// Engine, when set, gives the step budget of runs (see Runner).
	Engine *stepwise.Engine
	// ByAgent are the evaluators of each agent's runs.
	ByAgent map[string][]Evaluator
}

// JudgeRun judges one run with its agent's judges and stores the evals
// (replacing earlier judgments by the same judge). A run whose agent has
// no judge fails with ErrNoJudge.
func (j *Judges) JudgeRun(ctx context.Context, runID string) ([]*store.Eval, error) {
	run, err := j.Store.RunGet(ctx, &store.RunGetParams{ID: runID})
	if err != nil {
		return nil, fmt.Errorf("run %q: %w", runID, err)
	}
	evs := j.ByAgent[run.Agent]
	if len(evs) == 0 {
		return nil, fmt.Errorf("%w for agent %q (add observe.judge with rubrics to its agent file)", ErrNoJudge, run.Agent)
	}
	r, err := NewRunner(RunnerConfig{Store: j.Store, Engine: j.Engine, Evaluators: evs})
	if err != nil {
		return nil, err
	}
	return r.EvaluateRun(ctx, runID)
}

// JudgeSession judges every run of a session whose agent has judges,
// oldest first; a session without such a run fails with ErrNoJudge.
func (j *Judges) JudgeSession(ctx context.Context, sessionID string) ([]*store.Eval, error) {
	if _, err := j.Store.SessionGet(ctx, &store.SessionGetParams{ID: sessionID}); err != nil {
		return nil, fmt.Errorf("session %q: %w", sessionID, err)
	}
	runs, err := j.Store.RunList(ctx, &store.RunListParams{SessionID: sessionID})
	if err != nil {
		return nil, err
	}
	var out []*store.Eval
	judged := 0
	for i := len(runs) - 1; i >= 0; i-- { // RunList is newest first
		if len(j.ByAgent[runs[i].Agent]) == 0 {
			continue
		}
		judged++
		evs, err := j.JudgeRun(ctx, runs[i].ID)
		out = append(out, evs...)
		if err != nil {
			return out, err
		}
	}
	if judged == 0 {
		return nil, fmt.Errorf("%w for any agent of session %s (add observe.judge with rubrics to an agent file)", ErrNoJudge, sessionID)
	}
	return out, nil
}
