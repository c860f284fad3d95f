package eval

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/stepwise-run/stepwise"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// DefaultHeuristics are the evaluators run when a run ends: repeated state,
// loop, step budget, error rate and tool-call failure streak, with their
// default thresholds.
func DefaultHeuristics() []Evaluator {
	return []Evaluator{&RepeatedState{}, &Loop{}, &StepBudget{}, &ErrorRate{}, &ToolFailureStreak{}}
}

// Labels of heuristic evals.
const (
	LabelOK             = "ok"
	LabelRepeated       = "repeated_state"
	LabelLoop           = "loop"
	LabelExhausted      = "budget_exhausted"
	LabelNearBudget     = "near_budget"
	LabelHighErrorRate  = "high_error_rate"
	LabelFailureStreak  = "tool_failure_streak"
	labelStateRepeated  = "repeated"
	labelLoopStartsHere = "loop_start"
)

// fingerprint is the state a step observed, for the stuck-agent
// heuristics: its annotated state when set; for a tool call, the call and
// its result; for a model turn, its text and calls; for a custom step, its
// name and outputs. Other steps have none.
func fingerprint(s *stepwise.Step) (key, label string) {
	switch {
	case s.Annotations.State != "":
		return s.Name + "\x00" + s.Annotations.State, fmt.Sprintf("state %q of step %q", clip(s.Annotations.State, 60), s.Name)
	case s.Kind == steptype.KindTool || s.Kind == steptype.KindAgent:
		return "tool\x00" + s.ToolName + "\x00" + canonical(s.Inputs) + "\x00" + digest(s.Content),
			fmt.Sprintf("%s(%s) with the same result", s.ToolName, clip(canonical(s.Inputs), 60))
	case s.Kind == steptype.KindLLM:
		calls, _ := json.Marshal(canonicalCalls(s.ToolCalls))
		return "llm\x00" + digest(s.Content) + "\x00" + string(calls), fmt.Sprintf("model turn %q", clip(s.Content+string(calls), 60))
	case s.Kind == steptype.KindCustom || s.Kind == steptype.KindDecision:
		return "custom\x00" + s.Name + "\x00" + canonical(s.Outputs), fmt.Sprintf("step %q with outputs %s", s.Name, clip(canonical(s.Outputs), 60))
	}
	return "", ""
}

// action is the transition a step made, for the loop heuristic: a tool
// call (name and arguments) or a routing decision.
func action(s *stepwise.Step) string {
	switch s.Kind {
	case steptype.KindTool, steptype.KindAgent:
		return s.ToolName + "(" + canonical(s.Inputs) + ")"
	case steptype.KindDecision:
		return s.Name + "→" + canonical(s.Outputs)
	}
	return ""
}

// RepeatedState flags a run that observed the same state again and again
// (an agent stuck in a loop).
type RepeatedState struct {
	// Threshold is how many occurrences of one state flag the run.
	// Default 3.
	Threshold int
}

// Name returns "repeated_state".
func (*RepeatedState) Name() string { return "repeated_state" }

// Evaluate scores the run with the share of distinct states among its
// steps, labels it repeated_state when one state occurs Threshold times,
// and marks the step where that happened.
func (h *RepeatedState) Evaluate(_ context.Context, in *Input) ([]Result, error) {
	threshold := orDefault(h.Threshold, 3)
	seen := map[string][]int64{}
	total, worst, worstKey, worstLabel := 0, 0, "", ""
	var out []Result
	for _, s := range in.Steps {
		key, label := fingerprint(s)
		if key == "" {
			continue
		}
		total++
		seen[key] = append(seen[key], s.Sequence)
		n := len(seen[key])
		if n == threshold {
			out = append(out, Result{TargetKind: store.TargetStep, TargetID: s.ID, Score: 0, Label: labelStateRepeated,
				Description: fmt.Sprintf("%s seen %d times (sequences %s)", label, n, seqs(seen[key]))})
		}
		if n > worst {
			worst, worstKey, worstLabel = n, key, label
		}
	}
	if total == 0 {
		return nil, nil
	}
	run := Result{Score: float64(len(seen)) / float64(total), Label: LabelOK,
		Description: fmt.Sprintf("%d distinct states in %d steps", len(seen), total),
		Details:     map[string]any{"distinct": len(seen), "steps": total, "max_repeats": worst, "threshold": threshold}}
	if worst >= threshold {
		run.Label = LabelRepeated
		run.Description += fmt.Sprintf("; %s seen %d times (sequences %s)", worstLabel, worst, seqs(seen[worstKey]))
	}
	return append([]Result{run}, out...), nil
}

// Loop flags a run whose actions cycle: the same sequence of one to
// MaxPeriod actions repeated MinRepeats times in a row.
type Loop struct {
	MaxPeriod  int // longest cycle looked for; default 4
	MinRepeats int // consecutive repetitions that make a loop; default 3
}

// Name returns "loop".
func (*Loop) Name() string { return "loop" }

// Evaluate scores 0 (label loop) when a cycle is found, else 1.
func (h *Loop) Evaluate(_ context.Context, in *Input) ([]Result, error) {
	maxPeriod, repeats := orDefault(h.MaxPeriod, 4), orDefault(h.MinRepeats, 3)
	var acts []string
	var steps []*stepwise.Step
	for _, s := range in.Steps {
		if a := action(s); a != "" {
			acts, steps = append(acts, a), append(steps, s)
		}
	}
	if len(acts) == 0 {
		return nil, nil
	}
	for start := 0; start < len(acts); start++ {
		for p := 1; p <= maxPeriod && start+p*repeats <= len(acts); p++ {
			if !cycles(acts[start:start+p*repeats], p) {
				continue
			}
			n := repeats
			for start+(n+1)*p <= len(acts) && cycles(acts[start:start+(n+1)*p], p) {
				n++
			}
			desc := fmt.Sprintf("[%s] repeated %d times from sequence %d", clip(strings.Join(acts[start:start+p], " → "), 200), n, steps[start].Sequence)
			return []Result{
				{Score: 0, Label: LabelLoop, Description: desc, Details: map[string]any{"period": p, "repeats": n, "from_sequence": steps[start].Sequence}},
				{TargetKind: store.TargetStep, TargetID: steps[start].ID, Score: 0, Label: labelLoopStartsHere, Description: desc},
			}, nil
		}
	}
	return []Result{{Score: 1, Label: LabelOK, Description: fmt.Sprintf("no cycle of up to %d actions repeated %d times in %d actions", maxPeriod, repeats, len(acts))}}, nil
}

// cycles reports whether a consists of its first p elements repeated.
func cycles(a []string, p int) bool {
	for i := p; i < len(a); i++ {
		if a[i] != a[i-p] {
			return false
		}
	}
	return true
}

// StepBudget flags a run that exhausted its step budget, or came close.
type StepBudget struct {
	// Near is the share of the budget from which a run is flagged
	// near_budget (score 0.5). Default 0.8.
	Near float64
}

// Name returns "step_budget".
func (*StepBudget) Name() string { return "step_budget" }

// Evaluate scores 0 when the budget was exhausted, 0.5 near it, else 1.
func (h *StepBudget) Evaluate(_ context.Context, in *Input) ([]Result, error) {
	near := h.Near
	if near == 0 {
		near = 0.8
	}
	r := in.Run
	switch {
	case r.Error != nil && r.Error.Code == "max_steps":
		return []Result{{Score: 0, Label: LabelExhausted, Description: r.Error.Message}}, nil
	case in.MaxSteps > 0 && float64(r.StepCount) >= near*float64(in.MaxSteps):
		return []Result{{Score: 0.5, Label: LabelNearBudget, Description: fmt.Sprintf("%d of %d steps used", r.StepCount, in.MaxSteps)}}, nil
	case in.MaxSteps > 0:
		return []Result{{Score: 1, Label: LabelOK, Description: fmt.Sprintf("%d of %d steps used", r.StepCount, in.MaxSteps)}}, nil
	}
	return []Result{{Score: 1, Label: LabelOK, Description: fmt.Sprintf("%d steps used", r.StepCount)}}, nil
}

// ErrorRate scores a run by the share of its work steps (model, tool,
// custom and error steps) that failed.
type ErrorRate struct {
	// Threshold is the failure share above which the run is labelled
	// high_error_rate. Default 0.25.
	Threshold float64
}

// Name returns "error_rate".
func (*ErrorRate) Name() string { return "error_rate" }

// Evaluate scores 1 minus the failure share.
func (h *ErrorRate) Evaluate(_ context.Context, in *Input) ([]Result, error) {
	threshold := h.Threshold
	if threshold == 0 {
		threshold = 0.25
	}
	work, failed := 0, 0
	for _, s := range in.Steps {
		switch s.Kind {
		case steptype.KindLLM, steptype.KindTool, steptype.KindAgent, steptype.KindCustom, steptype.KindDecision, steptype.KindError:
			work++
			if s.Kind == steptype.KindError || s.Error != nil || s.Status == steptype.StepFailed {
				failed++
			}
		}
	}
	if work == 0 {
		return nil, nil
	}
	rate := float64(failed) / float64(work)
	label := LabelOK
	if rate > threshold {
		label = LabelHighErrorRate
	}
	return []Result{{Score: 1 - rate, Label: label, Description: fmt.Sprintf("%d of %d steps failed", failed, work),
		Details: map[string]any{"failed": failed, "steps": work, "threshold": threshold}}}, nil
}

// ToolFailureStreak flags a run in which tool calls failed many times in a
// row (model turns in between do not break a streak; a successful call
// does).
type ToolFailureStreak struct {
	// Threshold is the streak that flags the run. Default 3.
	Threshold int
}

// Name returns "tool_failure_streak".
func (*ToolFailureStreak) Name() string { return "tool_failure_streak" }

// Evaluate scores 0 when a streak reached Threshold (and marks the step
// where it did), else 1.
func (h *ToolFailureStreak) Evaluate(_ context.Context, in *Input) ([]Result, error) {
	threshold := orDefault(h.Threshold, 3)
	calls, streak, longest := 0, 0, 0
	var at *stepwise.Step
	for _, s := range in.Steps {
		isTool := s.Kind == steptype.KindTool || s.Kind == steptype.KindAgent || (s.Kind == steptype.KindError && s.ToolName != "")
		if !isTool {
			continue
		}
		calls++
		if s.Kind != steptype.KindError && s.Error == nil {
			streak = 0
			continue
		}
		if streak++; streak > longest {
			longest = streak
		}
		if streak == threshold && at == nil {
			at = s
		}
	}
	if calls == 0 {
		return nil, nil
	}
	desc := fmt.Sprintf("longest streak: %d failed tool calls in a row (of %d calls)", longest, calls)
	if at == nil {
		return []Result{{Score: 1, Label: LabelOK, Description: desc}}, nil
	}
	return []Result{
		{Score: 0, Label: LabelFailureStreak, Description: desc, Details: map[string]any{"longest": longest, "threshold": threshold}},
		{TargetKind: store.TargetStep, TargetID: at.ID, Score: 0, Label: LabelFailureStreak,
			Description: fmt.Sprintf("%d failed tool calls in a row up to here", threshold)},
	}, nil
}

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

func seqs(s []int64) string {
	parts := make([]string, 0, len(s))
	for i, q := range s {
		if i == 8 {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprint(q))
	}
	return strings.Join(parts, ", ")
}

// canonical re-encodes JSON with sorted keys; invalid JSON is returned as is.
func canonical(b json.RawMessage) string {
	var v any
	if len(bytes.TrimSpace(b)) == 0 || json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

func canonicalCalls(calls []steptype.ToolCall) []any {
	out := make([]any, len(calls))
	for i, c := range calls {
		out[i] = []string{c.Name, canonical(c.Arguments)}
	}
	return out
}

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

// clip cuts s to n bytes on a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
