package runexec

import (
	"time"

	"github.com/stepwise-run/stepwise/steptype"
)

// Publish stamps and delivers an event.
func (c *Core) Publish(ev *steptype.Event) { c.PublishWaited(ev, c.Env.Now()) }

// PublishAt delivers an event stamped with t: the time just read for what
// the event tells (a step's start, its commit), not read again.
func (c *Core) PublishAt(ev *steptype.Event, t time.Time) { c.PublishWaited(ev, t) }

// PublishWaited is PublishAt, reporting whether it waited for the inline
// consumer (the sink's buffer was full): the time read before it may then be
// long past.
func (c *Core) PublishWaited(ev *steptype.Event, t time.Time) (waited bool) {
	c.toSubscribers(ev, t)
	if c.Sink != nil {
		c.sinkMu.Lock()
		h := c.held
		c.held = nil
		waited = c.Sink.Send(c.Ctx.Done(), h, ev)
		c.sinkMu.Unlock()
	}
	return waited
}

// publishHeld is PublishAt for a step_completed event that the execution's
// next event follows at once (the next step's step_started, with no user
// code and no store write between; see Update.Hold): subscribers get it
// now, the inline consumer with that next event, so that the consumer's
// goroutine is woken once for both. Every later publish and every flush
// sends it first.
func (c *Core) publishHeld(ev *steptype.Event, t time.Time) {
	if c.Sink == nil {
		c.PublishAt(ev, t)
		return
	}
	c.toSubscribers(ev, t)
	c.sinkMu.Lock()
	c.sendHeld()
	c.held = ev
	c.sinkMu.Unlock()
}

// toSubscribers stamps ev with its session, run and time t and publishes
// it into the topic the execution acquired.
func (c *Core) toSubscribers(ev *steptype.Event, t time.Time) {
	ev.SessionID = c.Run.SessionID
	if ev.RunID == "" {
		ev.RunID = c.Run.ID
	}
	ev.Time = t
	c.Env.Broker.PublishTo(c.Topic, ev)
}

// Flush sends the held event to the inline consumer: before anything that
// may take time (a store write, user code) and when the loop ends.
func (c *Core) Flush() {
	if c.Sink == nil {
		return
	}
	c.sinkMu.Lock()
	c.sendHeld()
	c.sinkMu.Unlock()
}

// sendHeld sends the held event, if any; the caller holds sinkMu.
func (c *Core) sendHeld() {
	if h := c.held; h != nil {
		c.held = nil
		c.Sink.Send(c.Ctx.Done(), h, nil)
	}
}

// EmitDelta publishes a streamed fragment of the step in flight.
func (c *Core) EmitDelta(stepName string, d steptype.Delta) { c.EmitDeltaAt(stepName, d, time.Time{}) }

// EmitDeltaAt is EmitDelta stamped with t, the time just read for what the
// delta tells (the model's first token), or now when t is zero.
func (c *Core) EmitDeltaAt(stepName string, d steptype.Delta, t time.Time) {
	c.Deltas.Add(1)
	ed := &eventDelta{Event: steptype.Event{Type: steptype.EventStepDelta, StepName: stepName}, d: d}
	ed.Event.Delta = &ed.d
	if t.IsZero() {
		t = c.Env.Now()
	}
	c.PublishAt(&ed.Event, t)
}

// eventDelta is a step_delta event and its delta in one allocation.
type eventDelta struct {
	Event steptype.Event
	d     steptype.Delta
}
