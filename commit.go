package stepwise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/stepwise-run/stepwise/internal/ids"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// publish stamps and delivers an event.
func (x *execution) publish(ev *Event) { x.publishAt(ev, x.e.now()) }

// publishAt delivers an event stamped with t: the time just read for what
// the event tells (a step's start, its commit), not read again.
func (x *execution) publishAt(ev *Event, t time.Time) { x.publishWaited(ev, t) }

// publishWaited is publishAt, reporting whether it waited for the inline
// consumer (the sink's buffer was full): the time read before it may then be
// long past.
func (x *execution) publishWaited(ev *Event, t time.Time) (waited bool) {
	x.toSubscribers(ev, t)
	if x.sink != nil {
		x.sinkMu.Lock()
		h := x.held
		x.held = nil
		waited = x.sink.Send(x.ctx.Done(), h, ev)
		x.sinkMu.Unlock()
	}
	return waited
}

// publishHeld is publishAt for a step_completed event that the execution's
// next event follows at once (the next step's step_started, with no user
// code and no store write between; see runUpdate.hold): subscribers get it
// now, the inline consumer with that next event, so that the consumer's
// goroutine is woken once for both. Every later publish and every flush
// sends it first.
func (x *execution) publishHeld(ev *Event, t time.Time) {
	if x.sink == nil {
		x.publishAt(ev, t)
		return
	}
	x.toSubscribers(ev, t)
	x.sinkMu.Lock()
	x.sendHeld()
	x.held = ev
	x.sinkMu.Unlock()
}

// toSubscribers stamps ev with its session, run and time t and publishes
// it into the topic the execution acquired.
func (x *execution) toSubscribers(ev *Event, t time.Time) {
	ev.SessionID = x.run.SessionID
	if ev.RunID == "" {
		ev.RunID = x.run.ID
	}
	ev.Time = t
	x.e.broker.PublishTo(x.topic, ev)
}

// flush sends the held event to the inline consumer: before anything that
// may take time (a store write, user code) and when the loop ends.
func (x *execution) flush() {
	if x.sink == nil {
		return
	}
	x.sinkMu.Lock()
	x.sendHeld()
	x.sinkMu.Unlock()
}

// sendHeld sends the held event, if any; the caller holds sinkMu.
func (x *execution) sendHeld() {
	if h := x.held; h != nil {
		x.held = nil
		x.sink.Send(x.ctx.Done(), h, nil)
	}
}

func (x *execution) emitDelta(stepName string, d Delta) { x.emitDeltaAt(stepName, d, time.Time{}) }

// emitDeltaAt is emitDelta stamped with t, the time just read for what the
// delta tells (the model's first token), or now when t is zero.
func (x *execution) emitDeltaAt(stepName string, d Delta, t time.Time) {
	x.deltas.Add(1)
	ed := &eventDelta{Event: Event{Type: EventStepDelta, StepName: stepName}, d: d}
	ed.Event.Delta = &ed.d
	if t.IsZero() {
		t = x.e.now()
	}
	x.publishAt(&ed.Event, t)
}

// eventDelta is a step_delta event and its delta in one allocation.
type eventDelta struct {
	Event Event
	d     Delta
}

// runUpdate is the run change committed with a step.
type runUpdate struct {
	cursor *string
	patch  json.RawMessage // state update, combined by the agent's reducers
	edit   bool            // patch is a merge patch applied as is (a breakpoint's edit)
	// patchStep records the effective merge patch of patch.
	patchStep *Step
	status    *steptype.RunStatus
	output    *string
	err       *StepError
	finish    bool
	// completes: the steps are the run's last; the same commit completes
	// the run (status completed, its output the last assistant text with
	// these steps, the lease released), instead of a commit of its own.
	completes bool
	// inPlace: the engine built the steps and nothing outside it can hold
	// them (no handler or hook of the user saw them), so the store may
	// return them placed instead of copies (StepAppendParams.InPlace).
	inPlace bool
	// hold: the loop goes on to its next step at once after the commit, so
	// the last step_completed event may wait for the next event to reach
	// the inline consumer with it (publishHeld).
	hold bool
	// completed, when set, is a zero event allocated with the first step
	// (toolResult), used for that step's step_completed event instead of
	// a new one. It is used once: a tool step is committed once.
	completed *Event
}

// commit writes steps and the run change in one transaction, then updates
// the in-memory run and context and publishes the steps. The session's
// commit lock is held from the write to the publication, so positions
// follow sequence order.
func (x *execution) commit(steps []*Step, u runUpdate) error {
	now, proc := x.e.nowRead() // proc: the same reading for the steps' ids
	x.mu.Lock()
	state, progress := x.run.State, x.progress
	x.mu.Unlock()
	if len(u.patch) > 0 {
		next, patch, err := x.applyPatch(state, u.patch, u.edit)
		if err != nil {
			return err
		}
		state = next
		if u.patchStep != nil {
			u.patchStep.StatePatch = patch
		}
	}
	x.stampSteps(steps, now, proc, progress)
	if err := x.e.maskSteps(steps); err != nil {
		return err
	}
	if u.completes {
		completed, out := steptype.RunCompleted, x.outputWith(steps)
		u.status, u.output, u.finish = &completed, &out, true
	}
	x.setRunParams(&u, state, len(steps), now)
	defer func() { x.buf.runParams = store.RunUpdateParams{} }()
	if l := x.sessLock; l != nil {
		l.Lock()
		defer l.Unlock()
	} else {
		defer x.e.lockSession(x.run.SessionID)()
	}
	stored, err := x.write(steps, u.inPlace)
	if err != nil {
		return err
	}
	for _, s := range steps {
		x.noteOutput(s)
	}
	x.applyRun(&u, state, len(steps), now)
	x.announce(stored, &u, now)
	return nil
}

// stampSteps gives the steps of a commit their ids (the first one's from
// proc, the reading of the commit's time), run, parent, status, metrics,
// progress and time.
func (x *execution) stampSteps(steps []*Step, now, proc time.Time, progress *Progress) {
	for _, s := range steps {
		if s.ID == "" {
			s.ID = ids.At(proc)
			proc = time.Time{} // the next id reads the clock itself
		}
		s.SessionID, s.RunID, s.Hop = x.run.SessionID, x.run.ID, x.run.Hop
		if s.ParentID == "" {
			s.ParentID = x.prevStepID
		}
		if s.Status == "" {
			s.Status = steptype.StepCompleted
		}
		stampMetrics(s, now)
		if s.Progress == nil {
			s.Progress = progress
		}
		s.CreatedAt = now
		x.prevStepID = s.ID
	}
}

// setRunParams sets x.buf.runParams to the fenced run update of a commit of n
// steps (state: the run's state after u's patch).
func (x *execution) setRunParams(u *runUpdate, state json.RawMessage, n int, now time.Time) {
	x.buf.runParams = store.RunUpdateParams{
		ID: x.run.ID, Owner: x.e.cfg.Owner, ExpectStatus: expectRunning,
		Cursor: u.cursor, Status: u.status, Output: u.output, Error: u.err, StepDelta: int64(n), Now: now,
	}
	if len(u.patch) > 0 {
		x.buf.runParams.State = state
	}
	if u.finish || (u.status != nil && *u.status == steptype.RunWaiting) {
		x.buf.runParams.ClearLease = true
	}
}

// write appends the steps with the run update of x.buf.runParams in one
// transaction (or only updates the run when there are none) and returns
// the stored steps; a fenced write that fails says why (conflict).
func (x *execution) write(steps []*Step, inPlace bool) ([]*Step, error) {
	if x.buf.storeCtx == nil {
		x.buf.storeCtx = context.WithoutCancel(x.ctx)
	}
	var stored []*Step
	var err error
	if len(steps) > 0 {
		x.buf.appendRuns[0] = &x.buf.runParams
		x.buf.appendParams = store.StepAppendParams{Steps: steps, Runs: x.buf.appendRuns[:], InPlace: inPlace}
		stored, err = x.e.store.StepAppend(x.buf.storeCtx, &x.buf.appendParams)
		x.buf.appendRuns[0], x.buf.appendParams = nil, store.StepAppendParams{}
	} else {
		_, err = x.e.store.RunUpdate(x.buf.storeCtx, &x.buf.runParams)
	}
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, x.conflict(err)
		}
		// The commit may have happened and only its answer been lost
		// (store.ErrUnavailable): nothing of it is published here, so the
		// session's subscribers read what the store holds.
		x.e.broker.Poke(x.run.SessionID)
		return nil, fmt.Errorf("commit step: %w", err)
	}
	return stored, nil
}

// applyRun updates the in-memory run after a commit of n steps.
func (x *execution) applyRun(u *runUpdate, state json.RawMessage, n int, now time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if u.cursor != nil {
		x.run.Cursor = *u.cursor
	}
	if len(u.patch) > 0 {
		x.run.State = state
	}
	if u.status != nil {
		x.run.Status = *u.status
	}
	if u.output != nil {
		x.run.Output = *u.output
	}
	if u.err != nil {
		x.run.Error = u.err
	}
	x.run.StepCount += int64(n)
	x.run.UpdatedAt = now
}

// announce adds committed steps to the context and publishes their
// step_completed events, then runs the commit hooks.
func (x *execution) announce(stored []*Step, u *runUpdate, now time.Time) {
	for i, s := range stored {
		x.conv.Add(s)
		ev := u.completed
		if ev == nil || i > 0 {
			ev = new(Event)
		}
		*ev = Event{Type: EventStepCompleted, StepName: s.Name, Step: s}
		if u.hold && i == len(stored)-1 && s.Metadata["tool_attachments"] == nil {
			x.publishHeld(ev, now) // (a step's attachments are written after it)
		} else {
			x.publishAt(ev, now)
		}
	}
	if len(stored) > 0 {
		x.e.afterCommit(stored)
	}
}

// stampMetrics makes every committed step say when its work started and how
// long it took: a step without times finished at its commit; a waiting step
// (a request) has only its start, its finish is set when it is resolved.
func stampMetrics(s *Step, now time.Time) {
	m := &s.Metrics
	if m.StartedAt.IsZero() {
		m.StartedAt = now
	}
	if s.Status == steptype.StepWaiting {
		return
	}
	if m.FinishedAt.IsZero() {
		m.FinishedAt = now
	}
	if m.Duration == 0 && m.FinishedAt.After(m.StartedAt) {
		m.Duration = m.FinishedAt.Sub(m.StartedAt)
	}
}

// checkState refuses a state update that does not apply to the run state
// (an invalid patch, a reducer error): the step fails, nothing commits.
func (x *execution) checkState(v any) error {
	patch, err := toRaw(v)
	if err == nil {
		_, _, err = x.agent.applyState(x.run.State, patch)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidState, err)
	}
	return nil
}

func toRaw(v any) (json.RawMessage, error) {
	switch t := v.(type) {
	case json.RawMessage:
		if !json.Valid(t) {
			return nil, errors.New("invalid JSON")
		}
		return t, nil
	case []byte:
		if !json.Valid(t) {
			return nil, errors.New("invalid JSON")
		}
		return t, nil
	}
	return json.Marshal(v)
}
