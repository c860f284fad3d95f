package stepwise

import (
	"context"
	"fmt"
	"iter"

	"github.com/stepwise-run/stepwise/internal/broker"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

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
