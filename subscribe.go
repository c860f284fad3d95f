package stepwise

import (
	"context"
	"fmt"
	"iter"

	"github.com/stepwise-run/stepwise/internal/broker"
	"github.com/stepwise-run/stepwise/store"
)

// SubscribeParams select a stream: a whole session, or one run of it.
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
	// and exactly-once are those of the yielded events.
	Direct func(*Event) (taken, sent bool)
}

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
