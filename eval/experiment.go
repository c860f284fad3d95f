package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// ExperimentConfig configures RunExperiment.
type ExperimentConfig struct {
	// Engine runs the agent; its store must implement
	// store.ObservationStore. Required.
	Engine *stepwise.Engine
	// Agent is the registered agent to run. Required.
	Agent string
	// Dataset is the id or name of the dataset. Required.
	Dataset string
	// Name is unique among experiments. Default "<agent> on <dataset>
	// <time>".
	Name string
	// Concurrency bounds the items run at once. Default 4.
	Concurrency int
	// Evaluators judge each item's run. Default DefaultHeuristics() plus
	// ExactMatch.
	Evaluators []Evaluator
	// ItemTimeout bounds one item's run; 0 means none (the agent's limits
	// apply).
	ItemTimeout time.Duration
	// Logger receives item failures. Default slog.Default().
	Logger *slog.Logger
}

// Summary is the aggregate of an experiment, stored as its Summary JSON.
type Summary struct {
	Items     int `json:"items"`
	Completed int `json:"completed"`
	// Unfinished counts items whose run failed, was cancelled, is waiting
	// for input, or could not start.
	Unfinished int `json:"unfinished"`
	// Scores is the mean score of each eval name over the items that have
	// it.
	Scores          map[string]float64 `json:"scores"`
	MeanDurationSec float64            `json:"mean_duration_s"`
	InputTokens     int64              `json:"input_tokens"`
	OutputTokens    int64              `json:"output_tokens"`
	Cost            float64            `json:"cost"`
}

// Summarize aggregates item results.
func Summarize(items []*store.ExperimentItem) *Summary {
	s := &Summary{Items: len(items), Scores: map[string]float64{}}
	counts := map[string]int{}
	var dur time.Duration
	for _, it := range items {
		if it.Status == string(steptype.RunCompleted) {
			s.Completed++
		} else {
			s.Unfinished++
		}
		for name, v := range it.Scores {
			s.Scores[name] += v
			counts[name]++
		}
		dur += it.Duration
		s.InputTokens += it.InputTokens
		s.OutputTokens += it.OutputTokens
		s.Cost += it.Cost
	}
	for name, n := range counts {
		s.Scores[name] /= float64(n)
	}
	if len(items) > 0 {
		s.MeanDurationSec = dur.Seconds() / float64(len(items))
	}
	return s
}

// RunExperiment runs an agent over every item of a dataset, at most
// Concurrency at a time, each in a new session; evaluates each run with the
// evaluators (evals stored on the runs, scores copied into the item
// results); and records the experiment with its summary. Items that fail do
// not stop the others. Cancelling ctx stops starting items; the experiment
// is then recorded as cancelled.
func RunExperiment(ctx context.Context, cfg ExperimentConfig) (*store.Experiment, error) {
	e := cfg.Engine
	if e == nil || cfg.Agent == "" || cfg.Dataset == "" {
		return nil, fmt.Errorf("%w: experiment needs an engine, an agent and a dataset", store.ErrInvalid)
	}
	obs, err := observations(e.Store())
	if err != nil {
		return nil, err
	}
	if _, err := e.Agent(cfg.Agent); err != nil {
		return nil, err
	}
	ds, err := obs.DatasetGet(ctx, &store.DatasetGetParams{ID: cfg.Dataset})
	if errors.Is(err, store.ErrNotFound) {
		ds, err = obs.DatasetGet(ctx, &store.DatasetGetParams{Name: cfg.Dataset})
	}
	if err != nil {
		return nil, fmt.Errorf("dataset %q: %w", cfg.Dataset, err)
	}
	items, err := obs.DatasetItemList(ctx, &store.DatasetItemListParams{DatasetID: ds.ID})
	if err != nil {
		return nil, fmt.Errorf("dataset %q items: %w", ds.Name, err)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 4
	}
	if cfg.Evaluators == nil {
		cfg.Evaluators = append(DefaultHeuristics(), &ExactMatch{})
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Name == "" {
		cfg.Name = fmt.Sprintf("%s on %s %s", cfg.Agent, ds.Name, time.Now().UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	runner, err := NewRunner(RunnerConfig{Store: e.Store(), Evaluators: cfg.Evaluators, Engine: e, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	names := make([]string, len(cfg.Evaluators))
	for i, ev := range cfg.Evaluators {
		names[i] = ev.Name()
	}
	conf, _ := json.Marshal(map[string]any{"concurrency": cfg.Concurrency, "evaluators": names, "item_timeout_s": cfg.ItemTimeout.Seconds()})
	x, err := obs.ExperimentCreate(ctx, &store.ExperimentCreateParams{Experiment: &store.Experiment{
		ID: stepwise.NewID(), Name: cfg.Name, DatasetID: ds.ID, Agent: cfg.Agent, Config: conf,
	}})
	if err != nil {
		return nil, fmt.Errorf("create experiment: %w", err)
	}
	ex := &experiment{cfg: cfg, obs: obs, runner: runner, x: x}
	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	for _, it := range items {
		if ctx.Err() != nil {
			break
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			ex.item(ctx, it)
		}()
	}
	wg.Wait()
	return ex.finish(ctx)
}

// experiment is one RunExperiment call.
type experiment struct {
	cfg    ExperimentConfig
	obs    store.ObservationStore
	runner *Runner
	x      *store.Experiment
}

// item runs, evaluates and records one dataset item.
func (ex *experiment) item(ctx context.Context, it *store.DatasetItem) {
	res := &store.ExperimentItem{ExperimentID: ex.x.ID, Index: it.Index}
	if err := ex.run(ctx, it, res); err != nil {
		res.Status, res.Error = "error", err.Error()
		ex.cfg.Logger.Warn("stepwise: experiment item", "experiment", ex.x.Name, "item", it.Index, "err", err)
	}
	if _, err := ex.obs.ExperimentItemPut(context.WithoutCancel(ctx), &store.ExperimentItemPutParams{Item: res}); err != nil {
		ex.cfg.Logger.Error("stepwise: record experiment item", "experiment", ex.x.Name, "item", it.Index, "err", err)
	}
}

func (ex *experiment) run(ctx context.Context, it *store.DatasetItem, res *store.ExperimentItem) error {
	e := ex.cfg.Engine
	if ex.cfg.ItemTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ex.cfg.ItemTimeout)
		defer cancel()
	}
	r, err := e.StartRun(ctx, stepwise.StartParams{Agent: ex.cfg.Agent, Input: it.Input, Title: fmt.Sprintf("%s #%d", ex.x.Name, it.Index)})
	if err != nil {
		return fmt.Errorf("start run: %w", err)
	}
	res.SessionID, res.RunID = r.SessionID, r.ID
	final, err := e.Wait(ctx, e.Execute(ctx, r.ID))
	if errors.Is(err, store.ErrConflict) { // the background executor took it
		final, err = waitRun(ctx, e.Store(), r.ID)
	}
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	res.Status, res.Output = string(final.Status), final.Output
	if final.Error != nil {
		res.Error = final.Error.Message
	}
	in, err := ex.runner.Load(context.WithoutCancel(ctx), r.ID)
	if err != nil {
		return err
	}
	in.Expected = it.Expected
	for _, s := range in.Steps {
		res.InputTokens += s.Metrics.InputTokens
		res.OutputTokens += s.Metrics.OutputTokens
		res.Cost += s.Metrics.Cost
	}
	if end := final.FinishedAt; !end.IsZero() {
		res.Duration = end.Sub(final.CreatedAt)
	} else {
		res.Duration = final.UpdatedAt.Sub(final.CreatedAt)
	}
	evals, err := ex.runner.Evaluate(context.WithoutCancel(ctx), in)
	for _, ev := range evals {
		if ev.TargetKind == store.TargetRun {
			if res.Scores == nil {
				res.Scores = map[string]float64{}
			}
			res.Scores[ev.Name] = ev.Score
		}
	}
	if err != nil {
		return fmt.Errorf("evaluate: %w", err)
	}
	return nil
}

// waitRun polls a run executed elsewhere until it finishes or waits.
func waitRun(ctx context.Context, st store.Store, id string) (*stepwise.Run, error) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		r, err := st.RunGet(ctx, &store.RunGetParams{ID: id})
		if err != nil {
			return nil, err
		}
		if r.Status.Terminal() || r.Status == steptype.RunWaiting {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// finish records the summary and the final status.
func (ex *experiment) finish(ctx context.Context) (*store.Experiment, error) {
	bg := context.WithoutCancel(ctx)
	items, err := ex.obs.ExperimentItemList(bg, &store.ExperimentItemListParams{ExperimentID: ex.x.ID})
	if err != nil {
		return nil, fmt.Errorf("experiment items: %w", err)
	}
	sum, _ := json.Marshal(Summarize(items))
	status := store.ExperimentCompleted
	var msg *string
	if ctx.Err() != nil {
		status = store.ExperimentCancelled
		m := ctx.Err().Error()
		msg = &m
	}
	x, err := ex.obs.ExperimentUpdate(bg, &store.ExperimentUpdateParams{ID: ex.x.ID, Status: &status, Summary: sum, Error: msg})
	if err != nil {
		return nil, fmt.Errorf("finish experiment: %w", err)
	}
	return x, nil
}
