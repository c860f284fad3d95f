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
		pos := p.After
		var seen steptype.RunStatus // of the run of a run stream, as reported
		// The steps of the latest sequence emitted, with their status: a
		// step read from the store already answered is not repeated by the
		// ring's event of the answer.
		var lastSeq int64
		// The client has the step at the position it resumes from: (N, 0)
		// is only ever step N.
		var have int64
		if p.After.Idx == 0 {
			have = p.After.Seq
		}
		lastSteps := map[string]steptype.StepStatus{}
		emit := func(ev *Event) bool {
			if !pos.Less(ev.Position) {
				return true
			}
			if s := ev.Step; ev.Type == EventStepCompleted && s != nil {
				switch {
				case (s.Sequence < lastSeq || s.Sequence <= have) && (s.Kind != steptype.KindInput || s.Status == steptype.StepWaiting):
					// Only an answer updates a step the client has.
					// Anything else is a late publication of a step
					// delivered already: an engine publishes after its
					// commit, and the run, parked meanwhile, was answered
					// and went on elsewhere; or a ring that positioned
					// the step after an event (see broker.observe) serves
					// a reconnection from the step's own position.
					return true
				case s.Sequence > lastSeq:
					lastSeq = s.Sequence
					clear(lastSteps)
				}
				if st, ok := lastSteps[s.ID]; ok && st == s.Status {
					return true
				}
				lastSteps[s.ID] = s.Status
			}
			if p.RunID != "" && ev.RunID == p.RunID {
				switch {
				case ev.Type == EventRunWaiting && seen == steptype.RunWaiting:
					return true // reported already, from the store
				case ev.Run != nil:
					seen = ev.Run.Status
				case ev.Type == EventStepCompleted && ev.Step != nil && ev.Step.Status != steptype.StepWaiting:
					seen = steptype.RunRunning
				}
			}
			pos = ev.Position
			return yield(ev, nil)
		}
		// A delta handed to p.Direct: what emit does for one, without the
		// yield (a delta changes no state of the stream but its position).
		var direct func(*Event) (bool, bool)
		if p.Direct != nil {
			direct = func(ev *Event) (bool, bool) {
				if !pos.Less(ev.Position) {
					return true, true
				}
				taken, sent := p.Direct(ev)
				if taken {
					pos = ev.Position
				}
				return taken, sent
			}
		}
		for {
			sub, buffered, storeTo := e.broker.Subscribe(sid, p.RunID, pos, direct)
			done, err := e.catchUp(ctx, sid, p.RunID, &pos, storeTo, buffered, emit, seen)
			if err != nil || done {
				e.broker.Unsubscribe(sid, sub)
				if err != nil && err != errStopped {
					yield(nil, err)
				}
				return
			}
			finished, err := e.follow(ctx, sub, p.RunID, emit, p.Flush)
			e.broker.Unsubscribe(sid, sub)
			if err != nil || finished {
				if err != nil && err != errStopped {
					yield(nil, err)
				}
				return
			}
			// Lagged: catch up from the store and subscribe again.
		}
	}
}

// errStopped signals that the consumer stopped iterating.
var errStopped = fmt.Errorf("stepwise: consumer stopped")

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

// follow delivers live events until the subscriber lags (false, nil), the
// run finishes (true, nil), or ctx ends. flush, if set, is called before
// each wait (see SubscribeParams.Flush).
//
// It waits on the subscriber's ready channel alone, which a lag and the
// end of ctx signal too: a receive from one channel costs the scheduler
// less than a select over three, and it happens once per delivered batch.
// With a direct hook (SubscribeParams.Direct) publishers may deliver lone
// deltas while it waits (subscriber.deliver); it holds the consumer's
// role otherwise.
func (e *Engine) follow(ctx context.Context, sub *broker.Subscriber, runID string, emit func(*Event) bool, flush func() error) (bool, error) {
	stop := context.AfterFunc(ctx, sub.Wake)
	defer stop()
	var batch []*Event
	for {
		if flush != nil {
			if err := flush(); err != nil {
				return true, err
			}
		}
		sub.Wait()
		if err := ctx.Err(); err != nil {
			return true, err
		}
		lagged := sub.Lagged()
		batch = sub.Take(batch)
		for _, ev := range batch {
			if !emit(ev) {
				return true, errStopped
			}
			if runID != "" && ev.Type == EventRunFinished && ev.RunID == runID {
				return true, nil
			}
		}
		if lagged {
			// What was queued is delivered: catch up.
			return false, nil
		}
	}
}

// catchUp emits the committed steps after pos up to storeTo from the store
// (none when the ring covers pos; storeTo -1 means to the end), then the
// ring's buffered events. For a run stream it reports done when the run has
// already finished.
//
// A run stream also reports a park it has not reported (seen is the run's
// status as last reported): a run parked by another instance publishes
// nothing here.
func (e *Engine) catchUp(ctx context.Context, sid, runID string, pos *Position, storeTo int64, buffered []*Event, emit func(*Event) bool, seen steptype.RunStatus) (bool, error) {
	// A run stream reads the run's status before its steps: the steps
	// committed with that status (the input request of a park, the last
	// step of a finished run) are then in the step list. Read after the
	// steps, a park committed in between would be reported past a step
	// the stream never delivered.
	for retried := false; ; retried = true {
		from := *pos
		done, stale, err := e.catchUpOnce(ctx, sid, runID, pos, storeTo, buffered, emit, seen)
		if err != nil || done || !stale || (retried && *pos == from) {
			// A re-read that delivered nothing new cannot loop: the
			// run's later commits come with their notification.
			return done, err
		}
		// The run moved on between the reads: read the store again.
		storeTo, buffered = -1, nil
	}
}

// catchUpOnce is one pass of catchUp. stale reports that a run stream found
// its run waiting but the run's last step past what the stream has
// delivered: the park was answered and the run committed more steps after
// the store read. The park is then not reported: run_waiting positioned
// after that last step would make the stream skip the steps in between.
func (e *Engine) catchUpOnce(ctx context.Context, sid, runID string, pos *Position, storeTo int64, buffered []*Event, emit func(*Event) bool, seen steptype.RunStatus) (done, stale bool, err error) {
	var r *steptype.Run
	if runID != "" {
		if r, err = e.store.RunGet(ctx, &store.RunGetParams{ID: runID}); err != nil {
			return true, false, fmt.Errorf("run %q: %w", runID, err)
		}
	}
	if r != nil && (r.Status.Terminal() || r.Status == steptype.RunWaiting) {
		// The steps committed with that status may not be in the ring yet
		// (the executing engine publishes them after its commit): read
		// them from the store.
		storeTo = -1
	}
	var stored []*Event
	if storeTo != 0 && (storeTo < 0 || storeTo > pos.Seq) {
		end := max(storeTo, 0)
		pokes := e.broker.PokesOf(sid)
		steps, err := e.store.StepList(ctx, &store.StepListParams{SessionID: sid, StartSeq: pos.Seq + 1, EndSeq: end})
		if err != nil {
			return true, false, fmt.Errorf("replay steps: %w", err)
		}
		for _, s := range steps {
			if runID != "" && s.RunID != runID {
				continue
			}
			stored = append(stored, &Event{Type: EventStepCompleted, SessionID: sid, RunID: s.RunID, StepName: s.Name, Step: s, Time: s.CreatedAt, Position: Position{Seq: s.Sequence}})
		}
		if n := len(steps); n > 0 {
			e.broker.Observe(sid, steps[n-1].Sequence, pokes)
		}
	}
	// Committed steps and the ring's events in position order: a ring
	// event published between two commits (an answer) is not skipped.
	for len(stored) > 0 || len(buffered) > 0 {
		var ev *Event
		if len(buffered) == 0 || (len(stored) > 0 && !buffered[0].Position.Less(stored[0].Position)) {
			ev, stored = stored[0], stored[1:]
		} else {
			ev, buffered = buffered[0], buffered[1:]
		}
		if !emit(ev) {
			return true, false, errStopped
		}
		if runID != "" && ev.Type == EventRunFinished && ev.RunID == runID {
			return true, false, nil
		}
	}
	if runID == "" {
		return false, false, nil
	}
	if r.Status.Terminal() {
		ev := &Event{Type: EventRunFinished, SessionID: sid, RunID: r.ID, Run: r, Time: r.UpdatedAt, Position: Position{Seq: pos.Seq, Idx: pos.Idx + 1}}
		if !emit(ev) {
			return true, false, errStopped
		}
		return true, false, nil
	}
	if r.Status == steptype.RunWaiting && seen != steptype.RunWaiting {
		// The park committed the run's last step (an input request) with
		// the status: the event sits right after that step, so a client
		// already past it is not told again.
		last, err := e.store.StepList(ctx, &store.StepListParams{RunID: r.ID, Desc: true, Limit: 1})
		if err != nil {
			return true, false, fmt.Errorf("run %q: %w", runID, err)
		}
		if len(last) == 0 {
			return false, false, nil
		}
		if last[0].Sequence > pos.Seq {
			// Committed after the steps were read: the park is over.
			return false, true, nil
		}
		ev := &Event{Type: EventRunWaiting, SessionID: sid, RunID: r.ID, Run: r, Time: r.UpdatedAt, Position: Position{Seq: last[0].Sequence, Idx: 1}}
		if !emit(ev) {
			return true, false, errStopped
		}
	}
	return false, false, nil
}
