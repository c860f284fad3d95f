package steptype

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// EventType names what an event reports.
type EventType string

// Event types.
const (
	EventRunStarted  EventType = "run_started"
	EventStepStarted EventType = "step_started"
	EventStepDelta   EventType = "step_delta"
	// EventStepProgress carries a progress report of a step (Progress).
	EventStepProgress EventType = "step_progress"
	// EventStepYield carries a typed value a step streamed (Yield).
	EventStepYield EventType = "step_yield"
	// EventStepReset tells subscribers to discard what the step streamed so
	// far: its attempt failed after streaming and will be retried (or the
	// step failed for good). Reset says which attempt.
	EventStepReset     EventType = "step_reset"
	EventStepCompleted EventType = "step_completed"
	EventRunWaiting    EventType = "run_waiting"
	EventRunFinished   EventType = "run_finished"
)

// Position orders the events of a session. A committed step with sequence N
// is at (N, 0); every other event emitted after it and before the next
// commit is at (N, 1), (N, 2)… So a step's deltas always come before its
// completion, and a client that reconnects with its last position gets
// every later event exactly once.
type Position struct {
	Seq int64
	Idx int64
}

// Less reports whether p comes before q.
func (p Position) Less(q Position) bool {
	return p.Seq < q.Seq || (p.Seq == q.Seq && p.Idx < q.Idx)
}

// String formats the position as "SEQ:IDX", the SSE event id.
func (p Position) String() string {
	return strconv.FormatInt(p.Seq, 10) + ":" + strconv.FormatInt(p.Idx, 10)
}

// ParsePosition parses "SEQ:IDX" (or a bare "SEQ", meaning "SEQ:0").
func ParsePosition(s string) (Position, error) {
	seqPart, idxPart, hasIdx := strings.Cut(strings.TrimSpace(s), ":")
	seq, err := strconv.ParseInt(seqPart, 10, 64)
	if err != nil || seq < 0 {
		return Position{}, fmt.Errorf("stepwise: invalid event position %q: want SEQ:IDX with non-negative integers", s)
	}
	var idx int64
	if hasIdx {
		idx, err = strconv.ParseInt(idxPart, 10, 64)
		if err != nil || idx < 0 {
			return Position{}, fmt.Errorf("stepwise: invalid event position %q: want SEQ:IDX with non-negative integers", s)
		}
	}
	return Position{Seq: seq, Idx: idx}, nil
}

// Event is what streams from a run or a session.
type Event struct {
	Type      EventType `json:"type"`
	SessionID string    `json:"session_id"`
	RunID     string    `json:"run_id"`
	Position  Position  `json:"-"`
	Time      time.Time `json:"time"`
	// StepName is the graph step the event belongs to (started, delta).
	StepName string `json:"step_name,omitempty"`
	// Delta is set on step_delta events.
	Delta *Delta `json:"delta,omitempty"`
	// Step is set on step_completed events (the committed record).
	Step *Step `json:"step,omitempty"`
	// Run is set on run events (a snapshot of the run row).
	Run *Run `json:"run,omitempty"`
	// Progress is set on step_progress events.
	Progress *Progress `json:"progress,omitempty"`
	// Yield is set on step_yield events.
	Yield *Yield `json:"yield,omitempty"`
	// Reset is set on step_reset events.
	Reset *Reset `json:"reset,omitempty"`
}

// Yield is a typed value streamed by a step (Scope.Yield): an event name
// such as "validation.checking" and a JSON payload.
type Yield struct {
	Name string          `json:"name"`
	Data json.RawMessage `json:"data,omitempty"`
}

// Reset reports that the streamed output of a step's attempt is void.
type Reset struct {
	// Attempt is the attempt whose deltas must be discarded.
	Attempt int `json:"attempt"`
	// Reason is the error that ended the attempt.
	Reason string `json:"reason,omitempty"`
	// Retrying tells whether another attempt follows.
	Retrying bool `json:"retrying"`
}

// Delta is a streamed fragment of a step in flight.
type Delta struct {
	Content   string         `json:"content,omitempty"`
	Reasoning string         `json:"reasoning,omitempty"`
	ToolCall  *ToolCallDelta `json:"tool_call,omitempty"`
}

// ToolCallDelta is a fragment of a streamed tool call; Index identifies the
// call among parallel calls of one response.
type ToolCallDelta struct {
	Index     int    `json:"index"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"` // appended to the call's arguments
}
