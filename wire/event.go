package wire

import (
	"encoding/json"
	"time"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
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
	Step *steptype.Step `json:"step,omitempty"`
	// Run is set on run events (a snapshot of the run row).
	Run *steptype.Run `json:"run,omitempty"`
	// Progress is set on step_progress events.
	Progress *Progress `json:"progress,omitempty"`
	// Yield is set on step_yield events.
	Yield *Yield `json:"yield,omitempty"`
	// Reset is set on step_reset events.
	Reset *Reset `json:"reset,omitempty"`
}

// Progress is a progress report of a step; see steptype.Progress.
type Progress = steptype.Progress

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
	Content   string             `json:"content,omitempty"`
	Reasoning string             `json:"reasoning,omitempty"`
	ToolCall  *llm.ToolCallDelta `json:"tool_call,omitempty"`
}

// SubscribeParams select the events of a stream.
type SubscribeParams struct {
	SessionID string // required unless RunID is set
	RunID     string // only this run's events; the stream ends when it finishes
	// After is the position of the last event the client has; the stream
	// starts with the first event after it. The zero value replays the
	// whole session.
	After Position
	// Flush, when set, is called each time the sequence has yielded every
	// event it has and is about to wait for more: after the replay, and
	// after each batch of live events that arrived together. A consumer
	// that buffers what it writes (an HTTP response) sends it there, once
	// per batch instead of once per event, without a goroutine of its own
	// to learn that the stream went quiet. An error from it ends the
	// sequence, which yields that error.
	Flush func() error
	// Direct, when set, may be offered a live step_delta event instead of
	// the sequence yielding it: when one is published while the sequence
	// waits for events (after Flush), the publisher calls Direct on its
	// own goroutine, which saves waking the consumer's. Direct is
	// never called concurrently with the loop's body, Flush or itself, nor
	// after the sequence ended; it must not block. It reports whether it
	// took the event (if not, the sequence yields it as usual) and whether
	// it sent everything (if not, the sequence calls Flush before it waits
	// again, and an error from Flush ends it as usual). Positions, order
	// and exactly-once are those of the yielded events. The HTTP client
	// does not call it.
	Direct func(*Event) (taken, sent bool)
}

// EventData is the data line of an SSE event: the event with its position
// as ID, which repeats the event's id line.
type EventData struct {
	ID        string             `json:"id"`
	Type      string             `json:"type"`
	SessionID string             `json:"session_id"`
	RunID     string             `json:"run_id"`
	Time      time.Time          `json:"time"`
	StepName  string             `json:"step_name,omitempty"`
	Delta     *Delta             `json:"delta,omitempty"`
	Step      *steptype.Step     `json:"step,omitempty"`
	Run       *steptype.Run      `json:"run,omitempty"`
	Progress  *steptype.Progress `json:"progress,omitempty"`
	Yield     *Yield             `json:"yield,omitempty"`
	Reset     *Reset             `json:"reset,omitempty"`
}

// EventDataOf returns the SSE data of ev.
func EventDataOf(ev *Event) *EventData {
	return &EventData{ID: ev.Position.String(), Type: string(ev.Type), SessionID: ev.SessionID, RunID: ev.RunID, Time: ev.Time,
		StepName: ev.StepName, Delta: ev.Delta, Step: ev.Step, Run: ev.Run, Progress: ev.Progress, Yield: ev.Yield, Reset: ev.Reset}
}

// Event returns the event d describes, at position pos (the SSE id line).
func (d *EventData) Event(pos Position) *Event {
	return &Event{Type: EventType(d.Type), SessionID: d.SessionID, RunID: d.RunID, Position: pos, Time: d.Time,
		StepName: d.StepName, Delta: d.Delta, Step: d.Step, Run: d.Run, Progress: d.Progress, Yield: d.Yield, Reset: d.Reset}
}
