package wire

import (
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// The event types are defined in package steptype, shared with the
// machinery that publishes them; these aliases make them part of the wire.
type (
	// EventType names what an event reports.
	EventType = steptype.EventType
	// Event is what streams from a run or a session.
	Event = steptype.Event
	// Progress is a progress report of a step.
	Progress = steptype.Progress
	// Yield is a typed value streamed by a step.
	Yield = steptype.Yield
	// Reset reports that the streamed output of a step's attempt is void.
	Reset = steptype.Reset
	// Delta is a streamed fragment of a step in flight.
	Delta = steptype.Delta
)

// Event types.
const (
	EventRunStarted    = steptype.EventRunStarted
	EventStepStarted   = steptype.EventStepStarted
	EventStepDelta     = steptype.EventStepDelta
	EventStepProgress  = steptype.EventStepProgress
	EventStepYield     = steptype.EventStepYield
	EventStepReset     = steptype.EventStepReset
	EventStepCompleted = steptype.EventStepCompleted
	EventRunWaiting    = steptype.EventRunWaiting
	EventRunFinished   = steptype.EventRunFinished
)

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
