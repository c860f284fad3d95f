package steptype

import "fmt"

// Kind is what a step is. The set is closed; see docs/step_format.md.
type Kind string

// Step kinds.
const (
	KindUser     Kind = "user"     // input message of a turn
	KindLLM      Kind = "llm"      // one model call
	KindTool     Kind = "tool"     // one tool execution and its result
	KindAgent    Kind = "agent"    // a sub-agent call; its steps live in a child run
	KindInput    Kind = "input"    // a human-input request or tool approval
	KindDecision Kind = "decision" // a routing choice made by a custom step
	KindCustom   Kind = "custom"   // a user-defined step
	KindError    Kind = "error"    // a failed attempt
	KindSystem   Kind = "system"   // a bookkeeping record (context trimmed, policy remembered)
)

// Kinds lists every valid kind in a stable order.
var Kinds = []Kind{KindUser, KindLLM, KindTool, KindAgent, KindInput, KindDecision, KindCustom, KindError, KindSystem}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool {
	for _, v := range Kinds {
		if v == k {
			return true
		}
	}
	return false
}

// Role is the LLM message role a step plays in a model's context.
type Role string

// Message roles. A step with an empty role is not part of the model context.
const (
	RoleNone      Role = ""
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// StepStatus is the state of one step record.
type StepStatus string

// Step statuses. A step is written once in a final status, except input steps,
// which are written as waiting and later move to completed, rejected or expired.
const (
	StepCompleted StepStatus = "completed"
	StepFailed    StepStatus = "failed"
	StepWaiting   StepStatus = "waiting"
	StepExpired   StepStatus = "expired"
	StepCancelled StepStatus = "cancelled"
)

// RunStatus is the state of a run; see docs/state_machine.md.
type RunStatus string

// Run statuses.
const (
	RunQueued    RunStatus = "queued"
	RunRunning   RunStatus = "running"
	RunWaiting   RunStatus = "waiting"
	RunCompleted RunStatus = "completed"
	RunFailed    RunStatus = "failed"
	RunCancelled RunStatus = "cancelled"
)

// Terminal reports whether a run in status s can no longer change.
func (s RunStatus) Terminal() bool {
	return s == RunCompleted || s == RunFailed || s == RunCancelled
}

// Valid reports whether s is a known run status.
func (s RunStatus) Valid() bool {
	switch s {
	case RunQueued, RunRunning, RunWaiting, RunCompleted, RunFailed, RunCancelled:
		return true
	}
	return false
}

// ErrorClass says whether retrying a failed attempt can help.
type ErrorClass string

// Error classes.
const (
	ErrorTransient ErrorClass = "transient"
	ErrorPermanent ErrorClass = "permanent"
)

// ParseKind converts s to a Kind, or fails naming the valid kinds.
func ParseKind(s string) (Kind, error) {
	k := Kind(s)
	if !k.Valid() {
		return "", fmt.Errorf("stepwise: unknown step kind %q (want one of %v)", s, Kinds)
	}
	return k, nil
}
