package stepwise

import (
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/wire"
)

// EventType names what an event reports.
type EventType = wire.EventType

// Event types.
const (
	EventRunStarted    = wire.EventRunStarted
	EventStepStarted   = wire.EventStepStarted
	EventStepDelta     = wire.EventStepDelta
	EventStepProgress  = wire.EventStepProgress // a progress report of a step (Progress)
	EventStepYield     = wire.EventStepYield    // a typed value a step streamed (Yield)
	EventStepReset     = wire.EventStepReset    // discard what the step streamed so far (Reset)
	EventStepCompleted = wire.EventStepCompleted
	EventRunWaiting    = wire.EventRunWaiting
	EventRunFinished   = wire.EventRunFinished
)

// Position orders the events of a session; see wire.Position.
type Position = wire.Position

// ParsePosition parses "SEQ:IDX" (or a bare "SEQ", meaning "SEQ:0").
func ParsePosition(s string) (Position, error) { return wire.ParsePosition(s) }

// Event is what streams from a run or a session; see wire.Event.
type Event = wire.Event

// Progress is a progress report of a step; see steptype.Progress.
type Progress = steptype.Progress

// Yield is a typed value streamed by a step (Scope.Yield): an event name
// such as "validation.checking" and a JSON payload.
type Yield = wire.Yield

// Reset reports that the streamed output of a step's attempt is void.
type Reset = wire.Reset

// Delta is a streamed fragment of a step in flight.
type Delta = wire.Delta
