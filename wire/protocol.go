package wire

import (
	"encoding/json"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// Invocation identifies a run being driven step by step and remembers how far
// the caller has read.
type Invocation struct {
	RunID     string   `json:"run_id"`
	SessionID string   `json:"session_id"`
	After     Position `json:"-"`
	// Cursor is After as "SEQ:IDX", for clients that keep invocations as JSON.
	Cursor string `json:"cursor"`
}

// AgentStep is one of *Continuation, *HumanInputRequest, *Result, *Error.
type AgentStep interface{ agentStep() }

// Continuation reports one step the run committed, describing the run at
// that step (the same for every caller, whenever it reads). Progress and
// ProgressMessage are the last progress a step of the run reported
// (Scope.Progress) up to that step; Progress is nil when no fraction is
// known — it is never derived from the step count.
type Continuation struct {
	Status          string         `json:"status"`                     // run status at the step: "running", or "waiting" at an (answered) input step
	CurrentStep     string         `json:"current_step"`               // graph step the run went to after it (its cursor while nothing followed)
	Progress        *float64       `json:"progress"`                   // last reported fraction, 0..1; null when unknown
	ProgressMessage string         `json:"progress_message,omitempty"` // last reported progress message
	Step            *steptype.Step `json:"step"`                       // the committed step, as stored now
}

// HumanInputRequest asks the caller for input.
type HumanInputRequest struct {
	RequestID string             `json:"request_id"`
	Prompt    string             `json:"prompt"`
	Schema    json.RawMessage    `json:"schema,omitempty"`
	Context   map[string]any     `json:"context,omitempty"`
	Approval  *steptype.ToolCall `json:"approval,omitempty"` // set for tool-call approvals
	ExpiresAt time.Time          `json:"expires_at,omitzero"`
	// Breakpoint is set for a breakpoint's pause (see InputRequest).
	Breakpoint *BreakpointPause `json:"breakpoint,omitempty"`
}

// Result is the final output of a completed run.
type Result struct {
	Value    string         `json:"value"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Error reports a failed or cancelled run. It is an error, so a caller can
// return it as is or find it with errors.As; its cause is text (it crosses
// the wire), so there is nothing to unwrap.
type Error struct {
	Message     string `json:"message"`
	Cause       string `json:"cause,omitempty"`
	RetryCount  int    `json:"retry_count"`
	Recoverable bool   `json:"recoverable"`
}

// Error formats the message and, when there is one, the cause.
func (e *Error) Error() string {
	if e.Cause != "" && e.Cause != e.Message {
		return "stepwise: " + e.Message + ": " + e.Cause
	}
	return "stepwise: " + e.Message
}

func (*Continuation) agentStep()      {}
func (*HumanInputRequest) agentStep() {}
func (*Result) agentStep()            {}
func (*Error) agentStep()             {}

// The Type of a NextStep.
const (
	StepContinuation      = "continuation"
	StepHumanInputRequest = "human_input_request"
	StepResult            = "result"
	StepError             = "error"
)

// NextStep is the body of GET /v1/runs/{id}/next: the fields of one of the
// four protocol steps, flattened, its type name, and the cursor to pass as
// after next time.
type NextStep struct {
	Type   string `json:"type"` // continuation, human_input_request, result, error
	Cursor string `json:"cursor"`
	*Continuation
	*HumanInputRequest
	*Result
	*Error
}

// NextStepOf returns the body that carries step, at cursor.
func NextStepOf(step AgentStep, cursor string) *NextStep {
	out := &NextStep{Cursor: cursor}
	switch v := step.(type) {
	case *Continuation:
		out.Type, out.Continuation = StepContinuation, v
	case *HumanInputRequest:
		out.Type, out.HumanInputRequest = StepHumanInputRequest, v
	case *Result:
		out.Type, out.Result = StepResult, v
	case *Error:
		out.Type, out.Error = StepError, v
	}
	return out
}

// UnmarshalJSON decodes the flattened fields into the step Type names;
// the others stay nil.
func (n *NextStep) UnmarshalJSON(b []byte) error {
	var flat struct {
		Type   string `json:"type"`
		Cursor string `json:"cursor"`
		Continuation
		HumanInputRequest
		Result
		Error
	}
	if err := json.Unmarshal(b, &flat); err != nil {
		return err
	}
	*n = NextStep{Type: flat.Type, Cursor: flat.Cursor}
	switch flat.Type {
	case StepContinuation:
		n.Continuation = &flat.Continuation
	case StepHumanInputRequest:
		n.HumanInputRequest = &flat.HumanInputRequest
	case StepResult:
		n.Result = &flat.Result
	case StepError:
		n.Error = &flat.Error
	}
	return nil
}

// Step returns the protocol step n carries, nil for an unknown Type.
func (n *NextStep) Step() AgentStep {
	switch {
	case n.Continuation != nil:
		return n.Continuation
	case n.HumanInputRequest != nil:
		return n.HumanInputRequest
	case n.Result != nil:
		return n.Result
	case n.Error != nil:
		return n.Error
	}
	return nil
}

// InputRequest is what an input step asks: a prompt and, optionally, the
// JSON Schema the answer must satisfy and context for the person answering.
type InputRequest struct {
	Prompt  string          `json:"prompt"`
	Schema  json.RawMessage `json:"schema,omitempty"`
	Context map[string]any  `json:"context,omitempty"`
	// Approval names the tool call awaiting approval.
	Approval *steptype.ToolCall `json:"approval,omitempty"`
	// ExpiresAfter, when set, makes the request expire; then OnExpire
	// decides: "fail" (default) fails the run, "default" answers Default.
	ExpiresAfter time.Duration   `json:"-"`
	ExpiresAt    time.Time       `json:"expires_at,omitzero"`
	OnExpire     string          `json:"on_expire,omitempty"`
	Default      json.RawMessage `json:"default,omitempty"`
	// Breakpoint is set when the request is a breakpoint's pause: answered
	// with a BreakpointAnswer, the run goes on.
	Breakpoint *BreakpointPause `json:"breakpoint,omitempty"`
}

// Breakpoints pause a run before or after the steps they select. A
// selector is a step name, a step kind ("llm", "tool", "custom"), a tool
// name, "*" (every step), or one of them said explicitly: "step:NAME",
// "kind:KIND", "tool:NAME".
type Breakpoints struct {
	Before []string `json:"before,omitempty"`
	After  []string `json:"after,omitempty"`
}

// BreakpointPause says where a run paused: before or after which step,
// which selector matched (or "step" when the previous answer asked to
// step once), and the run's state at the pause.
type BreakpointPause struct {
	When    string          `json:"when"` // "before" or "after"
	Step    string          `json:"step"`
	Kind    steptype.Kind   `json:"kind,omitempty"`
	Tools   []string        `json:"tools,omitempty"` // the tool calls of a tools step
	Matched string          `json:"matched"`
	State   json.RawMessage `json:"state,omitempty"`
	// At is the run's step count with the pause recorded: answered, the
	// run does not pause again until another step commits.
	At int64 `json:"at"`
}

// ApprovalAnswer is the answer to a tool-call approval request.
type ApprovalAnswer struct {
	Approved bool   `json:"approved"`
	Message  string `json:"message,omitempty"` // shown to the model on rejection
	Always   bool   `json:"always,omitempty"`  // allow this tool for the rest of the session
}

// BreakpointAnswer answers a breakpoint's pause: Action "continue" (the
// default) runs on to the next breakpoint, "step" pauses again before the
// next step; State, a JSON object, is merged into the run's state (RFC
// 7386, the agent's reducers aside) before the run goes on. The strings
// "continue" and "step" are answers too.
type BreakpointAnswer struct {
	Action string          `json:"action,omitempty"`
	State  json.RawMessage `json:"state,omitempty"`
}

// PendingInput is a waiting input request.
type PendingInput struct {
	RequestID string         `json:"request_id"`
	RunID     string         `json:"run_id"`
	SessionID string         `json:"session_id"`
	Request   *InputRequest  `json:"request"`
	Step      *steptype.Step `json:"-"`
}
