package stepwise

import (
	"context"
	"encoding/json"
	"fmt"

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
func (s *Scope) SessionID() string { return s.exec.run.SessionID }

// Run returns a copy of the run row as of the start of this step.
func (s *Scope) Run() Run { return *s.exec.run }

// Agent returns the agent being run.
func (s *Scope) Agent() *Agent { return s.exec.agent }

// State returns the run's custom state snapshot (a JSON object, or nil).
func (s *Scope) State() json.RawMessage { return s.exec.run.State }

// DecodeState unmarshals the run's custom state into v.
func (s *Scope) DecodeState(v any) error {
	if len(s.exec.run.State) == 0 {
		return nil
	}
	if err := json.Unmarshal(s.exec.run.State, v); err != nil {
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
	s.exec.emitDelta(s.name, Delta{Content: text})
}

// Annotate sets the state/goal/action annotations of the step being built.
func (s *Scope) Annotate(a Annotations) { s.step.Annotations = a }
