package steptype

import (
	"encoding/json"
	"time"
)

// Step is one completed unit of work: the row of the step log. A step is
// written once and never mutated, except input steps (answered later) and the
// observation fields kept beside it (evals, annotations, attachments).
//
// The Go field names are for programs; the wire and storage format is the
// explicit JSON documented in docs/step_format.md and produced by MarshalJSON.
type Step struct {
	// Identity.
	ID        string     // UUIDv7, sortable by creation time
	SessionID string     // the session whose log holds the step
	RunID     string     // the run that produced it
	Sequence  int64      // 1..N within the session (lineage included), gap-free
	ParentID  string     // the previous step, or the calling step for a child run
	Hop       int        // nesting depth: 0 for the root agent, +1 per sub-agent
	Kind      Kind       // what the step is
	Name      string     // the graph step that produced it ("llm", "tools", a custom name)
	Status    StepStatus // completed, failed, waiting…

	// Message: the step is its own LLM message (zero conversion).
	Role       Role
	Content    string
	Reasoning  string
	ToolCalls  []ToolCall
	ToolCallID string
	ToolName   string

	// Work.
	Inputs     json.RawMessage // handler inputs, tool arguments, input request
	Outputs    json.RawMessage // handler outputs, tool result, input answer
	StatePatch json.RawMessage // JSON merge patch applied to the run state
	Error      *StepError

	// Metrics.
	Metrics Metrics

	// Observation.
	Annotations Annotations

	// Memory.
	Vector   []float32 // optional embedding
	Embedder string    // name of the embedder that produced Vector

	// Replay marks how a replayed step was produced: "reused" or "live"; empty
	// outside replays.
	Replay string
	// Fingerprint is the canonical hash of the model request (llm steps) or
	// of tool name+arguments (tool steps); replay matches on it.
	Fingerprint string

	// Progress is the run's last progress report (Scope.Progress) as of
	// this step: reported by this step or carried from an earlier step of
	// the same run; nil when none was reported yet.
	Progress *Progress

	// Metadata is free-form.
	Metadata map[string]any

	// CreatedAt is when the step was committed.
	CreatedAt time.Time
}

// ToolCall is one call a model asked for.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// StepError describes a failed attempt.
type StepError struct {
	Message     string     `json:"message"`
	Cause       string     `json:"cause,omitempty"`
	Class       ErrorClass `json:"class,omitempty"`
	Attempt     int        `json:"attempt,omitempty"`
	Recoverable bool       `json:"recoverable"`
	Code        string     `json:"code,omitempty"` // e.g. "timeout", "panic", "rate_limited", "http_400"
}

// Metrics are the measurements of a step.
type Metrics struct {
	StartedAt         time.Time
	FinishedAt        time.Time
	Duration          time.Duration
	FirstTokenLatency time.Duration
	InputTokens       int64
	OutputTokens      int64
	CachedTokens      int64
	ReasoningTokens   int64
	Cost              float64 // USD, from the price table
	Model             string
	Provider          string
	Attempt           int // 1-based attempt number of a retried call
	// Resource use while the step ran (from its start to its end in the
	// engine that executed it; zero for steps recorded elsewhere). The Go
	// runtime counts neither per goroutine: these are the process's
	// deltas, its other goroutines included (other steps, the garbage
	// collector, a server's requests), and OverlappingSteps says how many
	// other steps of the process ran at some point meanwhile — with 0 the
	// numbers are the step's own but for background work.
	//
	// CPUTime is the CPU time (user and system, all threads) the process
	// used (CLOCK_PROCESS_CPUTIME_ID; 0 where it cannot be read).
	CPUTime time.Duration
	// AllocBytes and AllocObjects are the heap bytes and objects the
	// process allocated (runtime/metrics /gc/heap/allocs:bytes and
	// :objects). The runtime counts small objects a span at a time per P
	// (when a P takes a new span), so a step that allocates less than a
	// few KiB may read 0 or a whole span; sums over many steps are exact
	// to within a span per P.
	AllocBytes       int64
	AllocObjects     int64
	OverlappingSteps int
}

// Annotations are the observation strings of a step (state, goal, action),
// with optional model-written summaries.
type Annotations struct {
	State         string `json:"state,omitempty"`
	StateSummary  string `json:"state_summary,omitempty"`
	Goal          string `json:"goal,omitempty"`
	GoalSummary   string `json:"goal_summary,omitempty"`
	Action        string `json:"action,omitempty"`
	ActionSummary string `json:"action_summary,omitempty"`
}

// IsZero reports whether no annotation is set.
func (a Annotations) IsZero() bool { return a == Annotations{} }

// InMessageContext reports whether the step is an LLM message.
func (s *Step) InMessageContext() bool { return s.Role != RoleNone }

// HasToolCalls reports whether the step is an assistant message with tool calls.
func (s *Step) HasToolCalls() bool { return s.Role == RoleAssistant && len(s.ToolCalls) > 0 }
