package broker

import (
	"context"
	"fmt"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// StreamParams select a stream of one session's events (see
// stepwise.SubscribeParams, which they carry).
type StreamParams struct {
	SessionID string
	RunID     string // only this run's events; the stream ends when it finishes
	// After is the position of the last event the client has.
	After steptype.Position
	// Flush is called each time the stream has yielded every event it has
	// and is about to wait for more; an error from it ends the stream.
	Flush func() error
	// Direct may be offered a live step_delta event instead of the stream
	// yielding it (see Subscriber.deliver).
	Direct func(*steptype.Event) (taken, sent bool)
}

// Stream yields the events of a session (or a run of it) after a
// position: first the committed steps from st, then live events, each
// exactly once and in position order. A subscriber that falls behind is
// switched to catch-up from the store instead of slowing the run. An error
// ends the stream; ctx cancels it; a yield that returns false releases it.
func (b *Broker) Stream(ctx context.Context, st store.Store, p StreamParams, yield func(*steptype.Event, error) bool) {
	sid := p.SessionID
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
	emit := func(ev *steptype.Event) bool {
		if !pos.Less(ev.Position) {
			return true
		}
		if s := ev.Step; ev.Type == steptype.EventStepCompleted && s != nil {
			switch {
			case (s.Sequence < lastSeq || s.Sequence <= have) && (s.Kind != steptype.KindInput || s.Status == steptype.StepWaiting):
				// Only an answer updates a step the client has.
				// Anything else is a late publication of a step
				// delivered already: an engine publishes after its
				// commit, and the run, parked meanwhile, was answered
				// and went on elsewhere; or a ring that positioned
				// the step after an event (see Broker.Observe) serves
				// a reconnection from the step's own position.
				return true
			case s.Sequence > lastSeq:
				lastSeq = s.Sequence
				clear(lastSteps)
			}
			if status, ok := lastSteps[s.ID]; ok && status == s.Status {
				return true
			}
			lastSteps[s.ID] = s.Status
		}
		if p.RunID != "" && ev.RunID == p.RunID {
			switch {
			case ev.Type == steptype.EventRunWaiting && seen == steptype.RunWaiting:
				return true // reported already, from the store
			case ev.Run != nil:
				seen = ev.Run.Status
			case ev.Type == steptype.EventStepCompleted && ev.Step != nil && ev.Step.Status != steptype.StepWaiting:
				seen = steptype.RunRunning
			}
		}
		pos = ev.Position
		return yield(ev, nil)
	}
	// A delta handed to p.Direct: what emit does for one, without the
	// yield (a delta changes no state of the stream but its position).
	var direct func(*steptype.Event) (bool, bool)
	if p.Direct != nil {
		direct = func(ev *steptype.Event) (bool, bool) {
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
		sub, buffered, storeTo := b.Subscribe(sid, p.RunID, pos, direct)
		done, err := b.catchUp(ctx, st, sid, p.RunID, &pos, storeTo, buffered, emit, seen)
		if err != nil || done {
			b.Unsubscribe(sid, sub)
			if err != nil && err != errStopped {
				yield(nil, err)
			}
			return
		}
		finished, err := b.follow(ctx, sub, p.RunID, emit, p.Flush)
		b.Unsubscribe(sid, sub)
		if err != nil || finished {
			if err != nil && err != errStopped {
				yield(nil, err)
			}
			return
		}
		// Lagged: catch up from the store and subscribe again.
	}
}

// errStopped signals that the consumer stopped iterating.
var errStopped = fmt.Errorf("stepwise: consumer stopped")

// follow delivers live events until the subscriber lags (false, nil), the
// run finishes (true, nil), or ctx ends. flush, if set, is called before
// each wait (see StreamParams.Flush).
//
// It waits on the subscriber's ready channel alone, which a lag and the
// end of ctx signal too: a receive from one channel costs the scheduler
// less than a select over three, and it happens once per delivered batch.
// With a direct hook (StreamParams.Direct) publishers may deliver lone
// deltas while it waits (subscriber.deliver); it holds the consumer's
// role otherwise.
func (b *Broker) follow(ctx context.Context, sub *Subscriber, runID string, emit func(*steptype.Event) bool, flush func() error) (bool, error) {
	stop := context.AfterFunc(ctx, sub.Wake)
	defer stop()
	var batch []*steptype.Event
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
			if runID != "" && ev.Type == steptype.EventRunFinished && ev.RunID == runID {
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
func (b *Broker) catchUp(ctx context.Context, st store.Store, sid, runID string, pos *steptype.Position, storeTo int64, buffered []*steptype.Event, emit func(*steptype.Event) bool, seen steptype.RunStatus) (bool, error) {
	// A run stream reads the run's status before its steps: the steps
	// committed with that status (the input request of a park, the last
	// step of a finished run) are then in the step list. Read after the
	// steps, a park committed in between would be reported past a step
	// the stream never delivered.
	for retried := false; ; retried = true {
		from := *pos
		done, stale, err := b.catchUpOnce(ctx, st, sid, runID, pos, storeTo, buffered, emit, seen)
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
func (b *Broker) catchUpOnce(ctx context.Context, st store.Store, sid, runID string, pos *steptype.Position, storeTo int64, buffered []*steptype.Event, emit func(*steptype.Event) bool, seen steptype.RunStatus) (done, stale bool, err error) {
	var r *steptype.Run
	if runID != "" {
		if r, err = st.RunGet(ctx, &store.RunGetParams{ID: runID}); err != nil {
			return true, false, fmt.Errorf("run %q: %w", runID, err)
		}
	}
	if r != nil && (r.Status.Terminal() || r.Status == steptype.RunWaiting) {
		// The steps committed with that status may not be in the ring yet
		// (the executing engine publishes them after its commit): read
		// them from the store.
		storeTo = -1
	}
	var stored []*steptype.Event
	if storeTo != 0 && (storeTo < 0 || storeTo > pos.Seq) {
		end := max(storeTo, 0)
		pokes := b.PokesOf(sid)
		steps, err := st.StepList(ctx, &store.StepListParams{SessionID: sid, StartSeq: pos.Seq + 1, EndSeq: end})
		if err != nil {
			return true, false, fmt.Errorf("replay steps: %w", err)
		}
		for _, s := range steps {
			if runID != "" && s.RunID != runID {
				continue
			}
			stored = append(stored, &steptype.Event{Type: steptype.EventStepCompleted, SessionID: sid, RunID: s.RunID, StepName: s.Name, Step: s, Time: s.CreatedAt, Position: steptype.Position{Seq: s.Sequence}})
		}
		if n := len(steps); n > 0 {
			b.Observe(sid, steps[n-1].Sequence, pokes)
		}
	}
	// Committed steps and the ring's events in position order: a ring
	// event published between two commits (an answer) is not skipped.
	for len(stored) > 0 || len(buffered) > 0 {
		var ev *steptype.Event
		if len(buffered) == 0 || (len(stored) > 0 && !buffered[0].Position.Less(stored[0].Position)) {
			ev, stored = stored[0], stored[1:]
		} else {
			ev, buffered = buffered[0], buffered[1:]
		}
		if !emit(ev) {
			return true, false, errStopped
		}
		if runID != "" && ev.Type == steptype.EventRunFinished && ev.RunID == runID {
			return true, false, nil
		}
	}
	if runID == "" {
		return false, false, nil
	}
	if r.Status.Terminal() {
		ev := &steptype.Event{Type: steptype.EventRunFinished, SessionID: sid, RunID: r.ID, Run: r, Time: r.UpdatedAt, Position: steptype.Position{Seq: pos.Seq, Idx: pos.Idx + 1}}
		if !emit(ev) {
			return true, false, errStopped
		}
		return true, false, nil
	}
	if r.Status == steptype.RunWaiting && seen != steptype.RunWaiting {
		// The park committed the run's last step (an input request) with
		// the status: the event sits right after that step, so a client
		// already past it is not told again.
		last, err := st.StepList(ctx, &store.StepListParams{RunID: r.ID, Desc: true, Limit: 1})
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
		ev := &steptype.Event{Type: steptype.EventRunWaiting, SessionID: sid, RunID: r.ID, Run: r, Time: r.UpdatedAt, Position: steptype.Position{Seq: last[0].Sequence, Idx: 1}}
		if !emit(ev) {
			return true, false, errStopped
		}
	}
	return false, false, nil
}
