package eval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/store"
)

// ErrNoStore is returned when a function or configuration of this package
// is given no store.
var ErrNoStore = errors.New("stepwise: eval: Store is required")

// observations returns the part of st that evals use, or ErrNoStore.
func observations(st store.Store) (store.ObservationStore, error) {
	if st == nil {
		return nil, ErrNoStore
	}
	return st, nil
}

// Input is what an evaluator judges: one finished run.
type Input struct {
	Run *stepwise.Run
	// Steps are the run's own steps in sequence order (a sub-agent's steps
	// belong to its child run).
	Steps []*stepwise.Step
	// Expected is the expected output of a dataset item; empty outside
	// experiments.
	Expected string
	// MaxSteps is the agent's step budget when known, else 0.
	MaxSteps int
}

// Result is one evaluation produced by an evaluator.
type Result struct {
	// TargetKind and TargetID say what is judged; empty means the run.
	TargetKind store.EvalTarget
	TargetID   string
	// Name defaults to the evaluator's name.
	Name string
	// Source defaults to store.SourceHeuristic.
	Source      store.EvalSource
	Score       float64 // in [0, 1], 1 is best
	Label       string
	Description string
	Details     any // marshalled to JSON
}

// Evaluator judges finished runs. Heuristics, the LLM judge and the
// expected-output matchers implement it; so can any program.
type Evaluator interface {
	// Name identifies the evaluator and names its evals.
	Name() string
	// Evaluate returns zero or more results; none means "not applicable".
	Evaluate(ctx context.Context, in *Input) ([]Result, error)
}

// RunnerConfig configures a Runner.
type RunnerConfig struct {
	// Store keeps the evals; it must implement store.ObservationStore.
	// Required.
	Store store.Store
	// Evaluators run on each run. Default DefaultHeuristics().
	Evaluators []Evaluator
	// Engine, when set, gives the step budget of each run's agent.
	Engine *stepwise.Engine
	// Logger receives evaluation failures of runs evaluated as an
	// observer. Default slog.Default().
	Logger *slog.Logger
}

// Runner evaluates finished runs with its evaluators and stores the
// results as evals. Registered with e.Observe, it evaluates every run when
// it ends, in the background.
type Runner struct {
	cfg RunnerConfig
	obs store.ObservationStore
}

// NewRunner returns a Runner.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	obs, err := observations(cfg.Store)
	if err != nil {
		return nil, err
	}
	if cfg.Evaluators == nil {
		cfg.Evaluators = DefaultHeuristics()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Runner{cfg: cfg, obs: obs}, nil
}

var _ stepwise.Observer = (*Runner)(nil)

// StepCommitted implements stepwise.Observer.
func (r *Runner) StepCommitted(context.Context, *stepwise.Run, *stepwise.Step) {}

// RunFinished implements stepwise.Observer: it evaluates the run.
func (r *Runner) RunFinished(ctx context.Context, run *stepwise.Run) {
	if _, err := r.EvaluateRun(ctx, run.ID); err != nil {
		r.cfg.Logger.Error("stepwise: evaluate run", "run", run.ID, "err", err)
	}
}

// Load reads the input of a run from the store.
func (r *Runner) Load(ctx context.Context, runID string) (*Input, error) {
	run, err := r.cfg.Store.RunGet(ctx, &store.RunGetParams{ID: runID})
	if err != nil {
		return nil, fmt.Errorf("run %q: %w", runID, err)
	}
	steps, err := r.cfg.Store.StepList(ctx, &store.StepListParams{RunID: runID})
	if err != nil {
		return nil, fmt.Errorf("steps of run %q: %w", runID, err)
	}
	in := &Input{Run: run, Steps: steps}
	if r.cfg.Engine != nil {
		if a, err := r.cfg.Engine.Agent(run.Agent); err == nil {
			in.MaxSteps = a.Limits.MaxSteps
		}
	}
	return in, nil
}

// EvaluateRun loads a run, evaluates it and stores the evals.
func (r *Runner) EvaluateRun(ctx context.Context, runID string) ([]*store.Eval, error) {
	in, err := r.Load(ctx, runID)
	if err != nil {
		return nil, err
	}
	return r.Evaluate(ctx, in)
}

// Evaluate runs every evaluator on in and stores their results. Each
// result replaces the one the same evaluator wrote for the same target
// before, so evaluating twice is harmless. An evaluator failing does not
// stop the others; their errors are joined.
func (r *Runner) Evaluate(ctx context.Context, in *Input) ([]*store.Eval, error) {
	var out []*store.Eval
	var errs []error
	for _, ev := range r.cfg.Evaluators {
		results, err := ev.Evaluate(ctx, in)
		if err != nil {
			errs = append(errs, fmt.Errorf("evaluator %s: %w", ev.Name(), err))
			continue
		}
		for _, res := range results {
			e, err := r.store(ctx, in.Run.ID, ev.Name(), res)
			if err != nil {
				errs = append(errs, fmt.Errorf("evaluator %s: %w", ev.Name(), err))
				continue
			}
			out = append(out, e)
		}
	}
	return out, errors.Join(errs...)
}

func (r *Runner) store(ctx context.Context, runID, evaluator string, res Result) (*store.Eval, error) {
	e := &store.Eval{TargetKind: res.TargetKind, TargetID: res.TargetID, Name: res.Name, Source: res.Source,
		Score: res.Score, Label: res.Label, Description: res.Description}
	if e.TargetKind == "" {
		e.TargetKind, e.TargetID = store.TargetRun, runID
	}
	if e.Name == "" {
		e.Name = evaluator
	}
	if e.Source == "" {
		e.Source = store.SourceHeuristic
	}
	if res.Details != nil {
		d, err := json.Marshal(res.Details)
		if err != nil {
			return nil, fmt.Errorf("details: %w", err)
		}
		e.Details = d
	}
	h := sha256.Sum256([]byte(runID + "\x00" + evaluator + "\x00" + e.Name + "\x00" + string(e.TargetKind) + "\x00" + e.TargetID))
	e.ID = "eval_" + hex.EncodeToString(h[:12])
	return r.obs.EvalPut(ctx, &store.EvalPutParams{Eval: e})
}

// ScoreParams are a user's evaluation of a step, run or session.
type ScoreParams struct {
	// ID, when set, replaces that eval; default a new id.
	ID         string
	TargetKind store.EvalTarget // required
	TargetID   string           // required
	// Name is what is scored; default "user".
	Name        string
	Score       float64 // in [0, 1], required
	Label       string
	Description string
	Author      string
}

// Score records a user score. It fails with an error wrapping
// store.ErrInvalid for a score outside [0, 1] or an unknown target kind, and
// store.ErrNotFound for a missing target; nothing is stored then.
func Score(ctx context.Context, st store.Store, p ScoreParams) (*store.Eval, error) {
	obs, err := observations(st)
	if err != nil {
		return nil, err
	}
	if err := store.CheckScore(p.Score); err != nil {
		return nil, err
	}
	if p.ID == "" {
		p.ID = stepwise.NewID()
	}
	if p.Name == "" {
		p.Name = "user"
	}
	e, err := obs.EvalPut(ctx, &store.EvalPutParams{Eval: &store.Eval{
		ID: p.ID, TargetKind: p.TargetKind, TargetID: p.TargetID, Name: p.Name, Source: store.SourceUser,
		Score: p.Score, Label: p.Label, Description: p.Description, Author: p.Author,
	}})
	if err != nil {
		return nil, fmt.Errorf("score %s %q: %w", p.TargetKind, p.TargetID, err)
	}
	return e, nil
}
