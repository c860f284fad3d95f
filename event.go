package stepwise

import (
	"context"
	"fmt"
	"iter"

	"github.com/stepwise-run/stepwise/internal/broker"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

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

// SubscribeParams select the events of Subscribe; see wire.SubscribeParams.
type SubscribeParams = wire.SubscribeParams

// Subscribe streams the events of a session (or a run) after a position:
// first the committed steps from the store, then live events, each exactly
// once and in position order. Deltas of steps already committed are not
// replayed from the store (the committed step supersedes them), but recent
// ones are served from an in-memory ring. A subscriber that falls behind is
// switched to catch-up from the store instead of slowing the run.
//
// Contract: each pair is an event or an error; an error ends the sequence;
// ctx cancels it; break releases it. A run stream ends after the run's
// run_finished event; a session stream runs until ctx is done.
func (e *Engine) Subscribe(ctx context.Context, p SubscribeParams) iter.Seq2[*Event, error] {
	return func(yield func(*Event, error) bool) {
		sid, err := e.streamSession(ctx, p)
		if err != nil {
			yield(nil, err)
			return
		}
		e.broker.Stream(ctx, e.store, broker.StreamParams{SessionID: sid, RunID: p.RunID, After: p.After, Flush: p.Flush, Direct: p.Direct}, yield)
	}
}

func (e *Engine) streamSession(ctx context.Context, p SubscribeParams) (string, error) {
	if p.RunID == "" {
		if _, err := e.store.SessionGet(ctx, &store.SessionGetParams{ID: p.SessionID}); err != nil {
			return "", fmt.Errorf("session %q: %w", p.SessionID, err)
		}
		return p.SessionID, nil
	}
	r, err := e.store.RunGet(ctx, &store.RunGetParams{ID: p.RunID})
	if err != nil {
		return "", fmt.Errorf("run %q: %w", p.RunID, err)
	}
	if p.SessionID != "" && p.SessionID != r.SessionID {
		return "", fmt.Errorf("%w: run %s is not in session %s", ErrNotFound, p.RunID, p.SessionID)
	}
	return r.SessionID, nil
}
