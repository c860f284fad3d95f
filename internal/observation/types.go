package observation

import (
	"context"
	"encoding/json"
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// Observer is told about committed steps and finished runs: evaluators,
// OpenTelemetry exporters, background summarizers. It is never on a run's
// critical path: each observer registered with Engine.Observe has its own
// queue and goroutine, receives its calls in commit order, and may take its
// time; when its queue is full, calls are dropped (and logged), the run is
// never slowed. The step and run are shared: an observer must not modify
// them.
type Observer interface {
	// StepCommitted is called after s was committed; r is the run as of
	// that commit.
	StepCommitted(ctx context.Context, r *steptype.Run, s *steptype.Step)
	// RunFinished is called after r reached a terminal status (completed,
	// failed, cancelled).
	RunFinished(ctx context.Context, r *steptype.Run)
}

// StepEventObserver is implemented by observers that also want the events
// inside steps (provider requests and responses, tool invocations, HTTP
// exchanges, sub-calls). An event is delivered before the commit of its
// step; the step may also never commit (a crash, a cancelled attempt).
type StepEventObserver interface {
	StepEvent(ctx context.Context, ev *StepEvent)
}

// Step event types recorded by the engine and by observe.Transport.
const (
	StepEventProviderRequest  = "provider_request"  // Payload: *llm.Request
	StepEventProviderResponse = "provider_response" // Payload: *llm.Response (nil on error)
	StepEventToolInvocation   = "tool_invocation"   // Payload: *ToolInvocation
	StepEventHTTP             = "http"              // an HTTP exchange of a step
)

// StepRef identifies the step an event belongs to. Model calls and custom
// steps know the id their step will be committed with (StepID); a tool call
// is identified by its ToolCallID and becomes the tool step that carries it.
type StepRef struct {
	SessionID  string
	RunID      string
	StepID     string
	StepName   string
	ToolCallID string
	Attempt    int
}

// StepEvent is a fine-grained event inside a step, as recorded. Payload is
// any value that marshals to JSON; observers marshal it off the critical
// path, so it must not change after it was recorded.
type StepEvent struct {
	StepRef
	Type     string
	Name     string // model, tool or "METHOD host/path"
	Time     time.Time
	Duration time.Duration
	Payload  any
	Error    string
}

// ToolInvocation is the payload of a tool_invocation event.
type ToolInvocation struct {
	Arguments      json.RawMessage `json:"arguments,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Content        string          `json:"content,omitempty"`
	Output         json.RawMessage `json:"output,omitempty"`
	IsError        bool            `json:"is_error,omitempty"`
}

// MaskFunc rewrites a step before it is persisted, e.g. to mask personal
// data. It runs on the run's critical path, for every step, before the
// commit; the committed (masked) step is also what later model calls see.
// Identity fields (ids, sequence, kind, status) are restored after it runs.
type MaskFunc func(*steptype.Step)
