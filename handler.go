package stepwise

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/wire"
)

// Handler executes one named step of an agent's graph. It receives a scope
// (session context, run state, delta emitter, the agent's model and tools)
// and returns where to go next. A returned error is recorded as an error
// step; a transient one (see llm.Classify) is retried by the engine under
// the agent's RetryPolicy, a permanent one fails the run.
//
// A handler must not keep its own durable state: everything that must
// survive a crash goes into the returned state patch or output, which the
// engine commits in one transaction with the run's cursor.
type Handler interface {
	HandleStep(ctx context.Context, s *Scope) (*Next, error)
}

// StepFunc adapts a function to a Handler.
type StepFunc func(ctx context.Context, s *Scope) (*Next, error)

// HandleStep calls f.
func (f StepFunc) HandleStep(ctx context.Context, s *Scope) (*Next, error) { return f(ctx, s) }

// Next is the result of a step: the next step name, a merge patch for the
// run's custom state, and what to record.
type Next struct {
	// Step is the next step: a custom step name, StepLLM, StepTools or
	// StepEnd. Required.
	Step string
	// State is a JSON merge patch (RFC 7386) applied to the run state: a
	// json.RawMessage, or any value that marshals to a JSON object.
	State any
	// Output is recorded as the step's outputs (any JSON value).
	Output any
	// Content is an optional human-readable summary of the step.
	Content string
	// Decision, when set, records the step as a decision.
	Decision *Decision
	// Input, when set, records a human-input request: the run parks (no
	// goroutine waits) and continues at Step once it is answered.
	Input *InputRequest
	// State/goal/action annotations of the step (docs/observation.md).
	Annotations Annotations

	// record is set by built-in steps that build their own step record.
	record *Step
	// committed is set by built-in steps that committed their steps already.
	committed bool
}

// Decision is a routing choice made by a custom step.
type Decision struct {
	Purpose string   `json:"purpose,omitempty"`
	Options []string `json:"options,omitempty"`
	Choice  string   `json:"choice"`
}

// InputRequest asks a human for input. The answer is validated against
// Schema when set. An approval request (Approval set) is answered with
// {"approved": bool, "message": "...", "always": bool}.
type InputRequest = wire.InputRequest

// Scope is what a handler sees: the session's context, the run and its
// state, the agent, and an emitter for streaming deltas. A scope is valid
// only during the HandleStep call.
type Scope struct {
	exec      *execution
	name      string
	step      *Step    // the step being built, with its pre-assigned id
	hookTrail []string // hooks that ran, recorded in the step's metadata
}

// StepName is the name of the step being executed.
func (s *Scope) StepName() string { return s.name }

// StepID is the id the step will be committed with.
func (s *Scope) StepID() string { return s.step.ID }

// SessionID is the session of the run.
func (s *Scope) SessionID() string { return s.exec.Run.SessionID }

// Run returns a copy of the run row as of the start of this step.
func (s *Scope) Run() Run { return *s.exec.Run }

// Agent returns the agent being run.
func (s *Scope) Agent() *Agent { return s.exec.agent }

// State returns the run's custom state snapshot (a JSON object, or nil).
func (s *Scope) State() json.RawMessage { return s.exec.Run.State }

// DecodeState unmarshals the run's custom state into v.
func (s *Scope) DecodeState(v any) error {
	if len(s.exec.Run.State) == 0 {
		return nil
	}
	if err := json.Unmarshal(s.exec.Run.State, v); err != nil {
		return fmt.Errorf("decode state: %w", err)
	}
	return nil
}

// Messages returns the model context of the run: the session's
// message-bearing steps in order. The slice must not be modified.
func (s *Scope) Messages() []llm.Message { return s.exec.allMessages() }

// LastAnswer returns the most recent answered input step of the run, or nil.
func (s *Scope) LastAnswer() *Step { return s.exec.lastAnswer }

// Emit streams a custom delta (e.g. progress text) to subscribers. Deltas
// are not stored; the committed step is.
func (s *Scope) Emit(text string) {
	s.exec.EmitDelta(s.name, Delta{Content: text})
}

// Annotate sets the state/goal/action annotations of the step being built.
func (s *Scope) Annotate(a Annotations) { s.step.Annotations = a }

// Attempt is the attempt of the step under the agent's retry policy,
// 1-based.
func (s *Scope) Attempt() int { return s.step.Metrics.Attempt }

// Step event types recorded for what a step reports through its scope.
const (
	StepEventYield    = "yield"    // Scope.Yield: Name is the yield's name, Payload its data
	StepEventProgress = "progress" // Scope.Progress: Payload is a *Progress
)

// Progress reports how far the run has come: fraction in [0,1] (clamped),
// and a message. Subscribers get a step_progress event at once; the report
// is recorded on the step being executed and carried by the run's later
// steps (Step.Progress), so the client protocol's continuations carry the
// last reported progress. A step that knows no fraction calls
// ProgressMessage instead.
func (s *Scope) Progress(fraction float64, message string) {
	if math.IsNaN(fraction) {
		fraction = 0
	}
	f := min(1, max(0, fraction))
	s.report(&Progress{Fraction: &f, Message: message})
}

// ProgressMessage reports progress without a fraction.
func (s *Scope) ProgressMessage(message string) { s.report(&Progress{Message: message}) }

func (s *Scope) report(p *Progress) {
	x := s.exec
	x.Mu.Lock()
	x.Progress = p
	x.Mu.Unlock()
	s.step.Progress = p
	x.Publish(&Event{Type: EventStepProgress, StepName: s.name, Progress: p})
	x.recordScopeEvent(s, &StepEvent{Type: StepEventProgress, Name: s.name, Payload: p})
}

// Yield streams a typed value: an event name (e.g. "validation.checking")
// and a payload that marshals to JSON. Subscribers receive it as a
// step_yield event in order with the step's deltas; it is recorded among the
// step's events (StepEventYield) when an observer records step events (the
// server does). It fails only when data does not marshal.
func (s *Scope) Yield(name string, data any) error {
	if name == "" {
		return fmt.Errorf("stepwise: yield needs a name")
	}
	var raw json.RawMessage
	if data != nil {
		var err error
		if raw, err = toRaw(data); err != nil {
			return fmt.Errorf("stepwise: yield %q: %w", name, err)
		}
	}
	y := &Yield{Name: name, Data: raw}
	s.exec.Publish(&Event{Type: EventStepYield, StepName: s.name, Yield: y})
	s.exec.recordScopeEvent(s, &StepEvent{Type: StepEventYield, Name: name, Payload: raw})
	return nil
}

// ReportUsage adds the token usage of a model call the step made itself
// to the step's metrics (model names the model, e.g. "openai:gpt-4o-mini",
// for the price table). The committed step carries the tokens and their
// cost, so they count in the run's and the session's totals like those of
// llm steps. It may be called several times.
func (s *Scope) ReportUsage(model string, u llm.Usage) {
	m := &s.step.Metrics
	m.InputTokens += u.InputTokens
	m.OutputTokens += u.OutputTokens
	m.CachedTokens += u.CachedTokens
	m.ReasoningTokens += u.ReasoningTokens
	if model != "" {
		if m.Model == "" {
			m.Model = model
		}
		if price, ok := s.exec.e.cfg.Prices.Lookup(model); ok {
			m.Cost += price.Cost(u.InputTokens, u.OutputTokens, u.CachedTokens)
		}
	}
}

// ReportCost adds a cost in USD that the price table cannot compute (e.g.
// a paid API the step called) to the step's metrics.
func (s *Scope) ReportCost(usd float64) {
	if usd > 0 && !math.IsInf(usd, 0) {
		s.step.Metrics.Cost += usd
	}
}

// Depth is the nesting depth of the run: 0 for a top-level run, 1 for a
// sub-agent called by it, and so on.
func (s *Scope) Depth() int { return s.exec.Run.Hop }

// Nested reports whether the run is a sub-agent's run.
func (s *Scope) Nested() bool { return s.exec.Run.ParentRunID != "" }

// ParentRunID is the run that called this sub-agent run ("" at the top).
func (s *Scope) ParentRunID() string { return s.exec.Run.ParentRunID }

// ParentStepID is the agent step of the parent run that called this run.
func (s *Scope) ParentStepID() string { return s.exec.Run.ParentStepID }

// Parent describes the calling run of a nested execution, or nil at the top.
func (s *Scope) Parent() *ParentExecution {
	if s.exec.parent != nil {
		p := s.exec.parent
		return &ParentExecution{RunID: p.Run.ID, StepID: s.exec.Run.ParentStepID, Agent: p.agent.Name, Depth: p.Run.Hop}
	}
	if s.exec.Run.ParentRunID == "" {
		return nil
	}
	return &ParentExecution{RunID: s.exec.Run.ParentRunID, StepID: s.exec.Run.ParentStepID, Depth: s.exec.Run.Hop - 1}
}

// ParentExecution is the calling run of a sub-agent run. Agent is known
// when the parent executes in the same process.
type ParentExecution struct {
	RunID  string `json:"run_id"`
	StepID string `json:"step_id"`
	Agent  string `json:"agent,omitempty"`
	Depth  int    `json:"depth"`
}

// recordScopeEvent records ev as an event of the scope's step when an
// observer records step events.
func (x *execution) recordScopeEvent(s *Scope, ev *StepEvent) {
	st := x.e.eventsState()
	if st == nil {
		return
	}
	st.Record(StepRef{SessionID: x.Run.SessionID, RunID: x.Run.ID, StepID: s.step.ID, StepName: s.name, Attempt: s.step.Metrics.Attempt}, ev)
}
