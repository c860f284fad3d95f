package stepwise

import "github.com/stepwise-run/stepwise/steptype"

// The event types are defined in package steptype, shared with the
// machinery that publishes them and with the wire; these aliases make them
// part of the root API.
type (
	// EventType names what an event reports; see steptype.EventType.
	EventType = steptype.EventType
	// Position orders the events of a session; see steptype.Position.
	Position = steptype.Position
	// Event is what streams from a run or a session; see steptype.Event.
	Event = steptype.Event
	// Progress is a progress report of a step; see steptype.Progress.
	Progress = steptype.Progress
	// Yield is a typed value streamed by a step (Scope.Yield); see
	// steptype.Yield.
	Yield = steptype.Yield
	// Reset reports that the streamed output of a step's attempt is void;
	// see steptype.Reset.
	Reset = steptype.Reset
	// Delta is a streamed fragment of a step in flight; see steptype.Delta.
	Delta = steptype.Delta
)

// Event types.
const (
	EventRunStarted  = steptype.EventRunStarted
	EventStepStarted = steptype.EventStepStarted
	EventStepDelta   = steptype.EventStepDelta
	// EventStepProgress carries a progress report of a step (Progress).
	EventStepProgress = steptype.EventStepProgress
	// EventStepYield carries a typed value a step streamed (Yield).
	EventStepYield = steptype.EventStepYield
	// EventStepReset tells subscribers to discard what the step streamed so
	// far; see steptype.EventStepReset.
	EventStepReset     = steptype.EventStepReset
	EventStepCompleted = steptype.EventStepCompleted
	EventRunWaiting    = steptype.EventRunWaiting
	EventRunFinished   = steptype.EventRunFinished
)

// ParsePosition parses "SEQ:IDX" (or a bare "SEQ", meaning "SEQ:0").
func ParsePosition(s string) (Position, error) { return steptype.ParsePosition(s) }
