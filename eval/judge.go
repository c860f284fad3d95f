package eval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/stepwise-run/stepwise/render"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// Rubric errors.
var (
	ErrNoCriteria = errors.New("stepwise: rubric has no criteria")
	ErrRubric     = errors.New("stepwise: invalid rubric")
	// ErrVerdict is returned when the judge model's answer cannot be read.
	ErrVerdict = errors.New("stepwise: unreadable judge verdict")
)

// Criterion is one pass/fail question of a rubric.
type Criterion struct {
	// Name identifies the criterion; unique in its rubric. Required.
	Name string `json:"name"`
	// Description says what passes. Required.
	Description string `json:"description"`
	// Weight is the criterion's share of the score; default 1.
	Weight float64 `json:"weight,omitempty"`
	// Required makes the rubric fail when this criterion fails, whatever
	// the score.
	Required bool `json:"required,omitempty"`
}

// Rubric is a set of weighted pass/fail criteria.
type Rubric struct {
	// Name names the evals; default "rubric".
	Name     string      `json:"name,omitempty"`
	Criteria []Criterion `json:"criteria"`
	// PassScore is the weighted score a run needs to pass. Default 0.75.
	PassScore float64 `json:"pass_score,omitempty"`
}

// withDefaults returns r with defaults filled in.
func (r Rubric) withDefaults() Rubric {
	if r.Name == "" {
		r.Name = "rubric"
	}
	if r.PassScore == 0 {
		r.PassScore = 0.75
	}
	c := make([]Criterion, len(r.Criteria))
	copy(c, r.Criteria)
	for i := range c {
		if c[i].Weight == 0 {
			c[i].Weight = 1
		}
	}
	r.Criteria = c
	return r
}

// Validate reports what is wrong with a rubric: ErrNoCriteria when it has
// none, ErrRubric for a nameless, undescribed or duplicate criterion, a
// negative or non-finite weight, or a pass score outside [0, 1].
func (r Rubric) Validate() error {
	if len(r.Criteria) == 0 {
		return ErrNoCriteria
	}
	var errs []error
	if r.PassScore < 0 || r.PassScore > 1 || math.IsNaN(r.PassScore) {
		errs = append(errs, fmt.Errorf("pass score %v outside [0, 1]", r.PassScore))
	}
	seen := map[string]bool{}
	for i, c := range r.Criteria {
		key := strings.ToLower(strings.TrimSpace(c.Name))
		switch {
		case key == "":
			errs = append(errs, fmt.Errorf("criterion %d has no name", i+1))
		case seen[key]:
			errs = append(errs, fmt.Errorf("criterion %q appears twice", c.Name))
		case strings.TrimSpace(c.Description) == "":
			errs = append(errs, fmt.Errorf("criterion %q has no description", c.Name))
		case c.Weight < 0 || math.IsNaN(c.Weight) || math.IsInf(c.Weight, 0):
			errs = append(errs, fmt.Errorf("criterion %q has weight %v: want a positive number", c.Name, c.Weight))
		}
		seen[key] = true
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrRubric, err)
	}
	return nil
}

// JudgeConfig configures an LLM judge.
type JudgeConfig struct {
	// Model grades the runs: any configured provider. Required.
	Model llm.Model
	// Rubric is what the model grades against. Required, with criteria.
	Rubric Rubric
	// Instructions are added to the judge's system prompt (the task's
	// context, the tone expected…).
	Instructions string
	// MaxTranscript bounds the characters of the run's trace shown to the
	// model; the start is cut first. Default 24000.
	MaxTranscript int
	// Timeout bounds one judgment. Default 2 minutes.
	Timeout time.Duration
}

// Judge is the LLM-judge evaluator: a model grades each finished run
// against a rubric of weighted pass/fail criteria. Its score is the weighted
// share of criteria passed.
type Judge struct {
	cfg JudgeConfig
}

// NewJudge validates the rubric and returns a judge.
func NewJudge(cfg JudgeConfig) (*Judge, error) {
	if cfg.Model == nil {
		return nil, errors.New("stepwise: judge: Model is required")
	}
	if err := cfg.Rubric.Validate(); err != nil {
		return nil, err
	}
	cfg.Rubric = cfg.Rubric.withDefaults()
	if cfg.MaxTranscript == 0 {
		cfg.MaxTranscript = 24000
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Minute
	}
	return &Judge{cfg: cfg}, nil
}

// Name returns the rubric's name.
func (j *Judge) Name() string { return j.cfg.Rubric.Name }

const judgeSystem = `You are a strict, fair evaluator of an AI agent's work.
You receive the task, the agent's trace, its final answer, sometimes the expected answer, and a list of criteria.
Decide for each criterion whether the agent's work passes it. Judge only what the trace shows.
Answer with one JSON object and nothing else:
{"criteria": [{"name": "<criterion name>", "pass": true or false, "reason": "<one sentence>"}]}`

// verdict is one criterion as graded.
type verdict struct {
	Name     string  `json:"name"`
	Weight   float64 `json:"weight"`
	Required bool    `json:"required,omitempty"`
	Pass     bool    `json:"pass"`
	Score    float64 `json:"score"` // 1 passed, 0 failed
	Reason   string  `json:"reason,omitempty"`
}

// Evaluate asks the model for a verdict on every criterion. It fails with
// ErrVerdict when the answer is not the JSON asked for or lacks a criterion.
func (j *Judge) Evaluate(ctx context.Context, in *Input) ([]Result, error) {
	ctx, cancel := context.WithTimeout(ctx, j.cfg.Timeout)
	defer cancel()
	system := judgeSystem
	if j.cfg.Instructions != "" {
		system += "\n\n" + j.cfg.Instructions
	}
	text, err := complete(ctx, j.cfg.Model, &llm.Request{System: system,
		Messages: []llm.Message{{Role: steptype.RoleUser, Content: j.prompt(in)}}})
	if err != nil {
		return nil, fmt.Errorf("judge: %w", err)
	}
	var answer struct {
		Criteria []struct {
			Name   string `json:"name"`
			Pass   *bool  `json:"pass"`
			Reason string `json:"reason"`
		} `json:"criteria"`
	}
	if err := llm.DecodeObject(text, &answer); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrVerdict, err)
	}
	got := map[string]int{}
	for i, c := range answer.Criteria {
		got[strings.ToLower(strings.TrimSpace(c.Name))] = i
	}
	r := j.cfg.Rubric
	var total, passed float64
	ok := true
	var failed []string
	verdicts := make([]verdict, len(r.Criteria))
	for i, c := range r.Criteria {
		k, found := got[strings.ToLower(strings.TrimSpace(c.Name))]
		if !found || answer.Criteria[k].Pass == nil {
			return nil, fmt.Errorf("%w: no pass/fail for criterion %q in %.300q", ErrVerdict, c.Name, text)
		}
		a := answer.Criteria[k]
		verdicts[i] = verdict{Name: c.Name, Weight: c.Weight, Required: c.Required, Pass: *a.Pass, Reason: a.Reason}
		if *a.Pass {
			verdicts[i].Score = 1
		}
		total += c.Weight
		if *a.Pass {
			passed += c.Weight
			continue
		}
		failed = append(failed, fmt.Sprintf("%s (%s)", c.Name, strings.TrimSpace(a.Reason)))
		if c.Required {
			ok = false
		}
	}
	score := 1.0
	if total > 0 {
		score = passed / total
	}
	label := "pass"
	if !ok || score < r.PassScore {
		label = "fail"
	}
	desc := fmt.Sprintf("%d of %d criteria passed", len(r.Criteria)-len(failed), len(r.Criteria))
	if len(failed) > 0 {
		desc += "; failed: " + strings.Join(failed, "; ")
	}
	return []Result{{Source: store.SourceLLMJudge, Score: score, Label: label, Description: desc,
		Details: map[string]any{"rubric": r.Name, "pass_score": r.PassScore, "model": j.cfg.Model.Name(), "criteria": verdicts}}}, nil
}

// prompt renders what the judge sees.
func (j *Judge) prompt(in *Input) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Task\n%s\n\n", in.Run.Input)
	trace := render.Steps(in.Steps)
	if limit := j.cfg.MaxTranscript; len(trace) > limit {
		cut := len(trace) - limit
		for cut < len(trace) && trace[cut]&0xc0 == 0x80 {
			cut++
		}
		trace = "[… earlier steps left out …]\n" + trace[cut:]
	}
	fmt.Fprintf(&b, "## Trace\n%s\n\n## Final answer (run %s)\n%s\n\n", trace, in.Run.Status, in.Run.Output)
	if in.Expected != "" {
		fmt.Fprintf(&b, "## Expected answer\n%s\n\n", in.Expected)
	}
	b.WriteString("## Criteria\n")
	for _, c := range j.cfg.Rubric.Criteria {
		req := ""
		if c.Required {
			req = ", required"
		}
		fmt.Fprintf(&b, "- %s (weight %g%s): %s\n", c.Name, c.Weight, req, c.Description)
	}
	return b.String()
}

// complete runs a model call to its final response and returns its text.
func complete(ctx context.Context, m llm.Model, req *llm.Request) (string, error) {
	resp, err := llm.Complete(ctx, m, req)
	if err != nil {
		return "", err
	}
	return resp.Content, nil
}
