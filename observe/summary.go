package observe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// DefaultSummaryPrompt is the system prompt of the summarizer.
const DefaultSummaryPrompt = `You summarize the observation notes of one step of an AI agent for a debugging dashboard.
You receive a JSON object whose keys are among "state", "goal" and "action".
Answer with a JSON object with exactly the same keys, each value a summary of at most 12 words.
Answer with the JSON object only.`

// SummarizerConfig configures a Summarizer.
type SummarizerConfig struct {
	// Store keeps the summaries. Required.
	Store store.Store
	// Model writes the summaries. Required.
	Model llm.Model
	// Prompt is the system prompt. Default DefaultSummaryPrompt.
	Prompt string
	// MaxInput bounds the characters of each annotation sent. Default 4000.
	MaxInput int
	// Timeout bounds one model call. Default 1 minute.
	Timeout time.Duration
	// Logger receives failures. Default slog.Default().
	Logger *slog.Logger
	// Kinds, when set, limits the steps summarized to these kinds.
	Kinds []steptype.Kind
	// Agent, when set, limits the steps summarized to the runs of this
	// agent.
	Agent string
	// Derive summarizes steps that carry no state, goal or action too,
	// deriving them from the step (see Derive); without it only annotated
	// steps are summarized.
	Derive bool
}

// Summarizer writes model summaries of the state, goal and action of steps
// in the background: registered with e.Observe, it summarizes each
// committed step that has annotations without summaries, after the commit,
// on the observer's own goroutine — never on the run's critical path. The
// summaries are stored as annotation rows beside the step.
type Summarizer struct {
	cfg SummarizerConfig
	obs store.ObservationStore
}

// NewSummarizer returns a Summarizer.
func NewSummarizer(cfg SummarizerConfig) (*Summarizer, error) {
	if cfg.Store == nil {
		return nil, ErrNoStore
	}
	if cfg.Model == nil {
		return nil, errors.New("stepwise: summarizer: Model is required")
	}
	if cfg.Prompt == "" {
		cfg.Prompt = DefaultSummaryPrompt
	}
	if cfg.MaxInput == 0 {
		cfg.MaxInput = 4000
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Summarizer{cfg: cfg, obs: cfg.Store}, nil
}

var _ stepwise.Observer = (*Summarizer)(nil)

// StepCommitted implements stepwise.Observer.
func (s *Summarizer) StepCommitted(ctx context.Context, run *stepwise.Run, step *stepwise.Step) {
	if !s.wants(run, step) {
		return
	}
	a := step.Annotations
	if s.cfg.Derive {
		a = Derive(ctx, s.cfg.Store, run, step)
	}
	if len(missing(a)) == 0 {
		return
	}
	if _, err := s.Summarize(ctx, step.ID, a); err != nil {
		s.cfg.Logger.Warn("stepwise: summarize step annotations", "step", step.ID, "err", err)
	}
}

// RunFinished implements stepwise.Observer.
func (s *Summarizer) RunFinished(context.Context, *stepwise.Run) {}

// missing returns the annotations that have no summary.
func missing(a steptype.Annotations) map[string]string {
	m := map[string]string{}
	for _, f := range []struct{ k, v, sum string }{
		{"state", a.State, a.StateSummary}, {"goal", a.Goal, a.GoalSummary}, {"action", a.Action, a.ActionSummary},
	} {
		if f.v != "" && f.sum == "" {
			m[f.k] = f.v
		}
	}
	return m
}

// Summarize asks the model for summaries of the annotations a of a step
// that lack one, and stores them. The API uses it after Annotate.
func (s *Summarizer) Summarize(ctx context.Context, stepID string, a steptype.Annotations) (*store.Annotation, error) {
	in := missing(a)
	if len(in) == 0 {
		return nil, nil
	}
	for k, v := range in {
		in[k] = clip(v, s.cfg.MaxInput)
	}
	msg, _ := json.Marshal(in)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	text, err := complete(ctx, s.cfg.Model, &llm.Request{System: s.cfg.Prompt,
		Messages: []llm.Message{{Role: steptype.RoleUser, Content: string(msg)}}})
	if err != nil {
		return nil, fmt.Errorf("summarize: %w", err)
	}
	var out map[string]string
	if err := llm.DecodeObject(text, &out); err != nil {
		return nil, fmt.Errorf("summarize: model answer: %w", err)
	}
	p := &store.AnnotationPutParams{StepID: stepID}
	for key, dst := range map[string]**string{"state": &p.StateSummary, "goal": &p.GoalSummary, "action": &p.ActionSummary} {
		if v := strings.TrimSpace(out[key]); v != "" && in[key] != "" {
			*dst = &v
		}
	}
	if p.StateSummary == nil && p.GoalSummary == nil && p.ActionSummary == nil {
		return nil, fmt.Errorf("summarize: the model answered no summary: %.200q", text)
	}
	return s.obs.AnnotationPut(ctx, p)
}

// complete runs a model call to its final response and returns its text.
func complete(ctx context.Context, m llm.Model, req *llm.Request) (string, error) {
	resp, err := llm.Complete(ctx, m, req)
	if err != nil {
		return "", err
	}
	return resp.Content, nil
}

// clip cuts s to at most n bytes on a character boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
