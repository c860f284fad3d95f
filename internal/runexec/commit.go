package runexec

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

// Update is the run change committed with a step.
type Update struct {
	Cursor *string
	Patch  json.RawMessage // state update, combined by the agent's reducers
	Edit   bool            // Patch is a merge patch applied as is (a breakpoint's edit)
	// PatchStep records the effective merge patch of Patch.
	PatchStep *steptype.Step
	Status    *steptype.RunStatus
	Output    *string
	Err       *steptype.StepError
	Finish    bool
	// Completes: the steps are the run's last; the same commit completes
	// the run (status completed, its output the last assistant text with
	// these steps, the lease released), instead of a commit of its own.
	Completes bool
	// InPlace: the engine built the steps and nothing outside it can hold
	// them (no handler or hook of the user saw them), so the store may
	// return them placed instead of copies (StepAppendParams.InPlace).
	InPlace bool
	// Hold: the loop goes on to its next step at once after the commit, so
	// the last step_completed event may wait for the next event to reach
	// the inline consumer with it (publishHeld).
	Hold bool
	// Completed, when set, is a zero event allocated with the first step,
	// used for that step's step_completed event instead of a new one. It is
	// used once: a tool step is committed once.
	Completed *steptype.Event
}

// Commit writes steps and the run change in one transaction, then updates
// the in-memory run and context and publishes the steps. The session's
// commit lock is held from the write to the publication, so positions
// follow sequence order.
func (c *Core) Commit(steps []*steptype.Step, u Update) error {
	now, proc := c.Env.NowRead() // proc: the same reading for the steps' ids
	state, err := c.prepare(steps, &u, now, proc)
	if err != nil {
		return err
	}
	c.setRunParams(&u, state, len(steps), now)
	defer func() { c.runParams = store.RunUpdateParams{} }()
	if l := c.SessLock; l != nil {
		l.Lock()
		defer l.Unlock()
	} else {
		defer c.Env.LockSession(c.Run.SessionID)()
	}
	stored, err := c.write(steps, u.InPlace)
	if err != nil {
		return err
	}
	for _, s := range steps {
		c.NoteOutput(s)
	}
	c.applyRun(&u, state, len(steps), now)
	c.announce(stored, &u, now)
	return nil
}

// prepare readies a commit: the run's state after u's patch, the steps
// stamped and masked, and a completing update's status and output.
func (c *Core) prepare(steps []*steptype.Step, u *Update, now, proc time.Time) (json.RawMessage, error) {
	c.Mu.Lock()
	state, progress := c.Run.State, c.Progress
	c.Mu.Unlock()
	if len(u.Patch) > 0 {
		next, patch, err := c.Unit.ApplyPatch(state, u.Patch, u.Edit)
		if err != nil {
			return nil, err
		}
		state = next
		if u.PatchStep != nil {
			u.PatchStep.StatePatch = patch
		}
	}
	c.stampSteps(steps, now, proc, progress)
	if err := c.Env.Mask(steps); err != nil {
		return nil, err
	}
	if u.Completes {
		completed, out := steptype.RunCompleted, c.OutputWith(steps)
		u.Status, u.Output, u.Finish = &completed, &out, true
	}
	return state, nil
}

// stampSteps gives the steps of a commit their ids (the first one's from
// proc, the reading of the commit's time), run, parent, status, metrics,
// progress and time.
func (c *Core) stampSteps(steps []*steptype.Step, now, proc time.Time, progress *steptype.Progress) {
	for _, s := range steps {
		if s.ID == "" {
			s.ID = ids.At(proc)
			proc = time.Time{} // the next id reads the clock itself
		}
		s.SessionID, s.RunID, s.Hop = c.Run.SessionID, c.Run.ID, c.Run.Hop
		if s.ParentID == "" {
			s.ParentID = c.PrevStepID
		}
		if s.Status == "" {
			s.Status = steptype.StepCompleted
		}
		stampMetrics(s, now)
		if s.Progress == nil {
			s.Progress = progress
		}
		s.CreatedAt = now
		c.PrevStepID = s.ID
	}
}

// setRunParams sets c.runParams to the fenced run update of a commit of n
// steps (state: the run's state after u's patch).
func (c *Core) setRunParams(u *Update, state json.RawMessage, n int, now time.Time) {
	c.runParams = store.RunUpdateParams{
		ID: c.Run.ID, Owner: c.Env.Owner, ExpectStatus: expectRunning,
		Cursor: u.Cursor, Status: u.Status, Output: u.Output, Error: u.Err, StepDelta: int64(n), Now: now,
	}
	if len(u.Patch) > 0 {
		c.runParams.State = state
	}
	if u.Finish || (u.Status != nil && *u.Status == steptype.RunWaiting) {
		c.runParams.ClearLease = true
	}
}

// write appends the steps with the run update of c.runParams in one
// transaction (or only updates the run when there are none) and returns
// the stored steps; a fenced write that fails says why (Conflict).
func (c *Core) write(steps []*steptype.Step, inPlace bool) ([]*steptype.Step, error) {
	if c.storeCtx == nil {
		c.storeCtx = context.WithoutCancel(c.Ctx)
	}
	var stored []*steptype.Step
	var err error
	if len(steps) > 0 {
		c.appendRuns[0] = &c.runParams
		c.appendParams = store.StepAppendParams{Steps: steps, Runs: c.appendRuns[:], InPlace: inPlace}
		stored, err = c.Env.Store.StepAppend(c.storeCtx, &c.appendParams)
		c.appendRuns[0], c.appendParams = nil, store.StepAppendParams{}
	} else {
		_, err = c.Env.Store.RunUpdate(c.storeCtx, &c.runParams)
	}
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, c.Conflict(err)
		}
		// The commit may have happened and only its answer been lost
		// (store.ErrUnavailable): nothing of it is published here, so the
		// session's subscribers read what the store holds.
		c.Env.Broker.Poke(c.Run.SessionID)
		return nil, fmt.Errorf("commit step: %w", err)
	}
	return stored, nil
}

// applyRun updates the in-memory run after a commit of n steps.
func (c *Core) applyRun(u *Update, state json.RawMessage, n int, now time.Time) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	if u.Cursor != nil {
		c.Run.Cursor = *u.Cursor
	}
	if len(u.Patch) > 0 {
		c.Run.State = state
	}
	if u.Status != nil {
		c.Run.Status = *u.Status
	}
	if u.Output != nil {
		c.Run.Output = *u.Output
	}
	if u.Err != nil {
		c.Run.Error = u.Err
	}
	c.Run.StepCount += int64(n)
	c.Run.UpdatedAt = now
}

// announce adds committed steps to the context and publishes their
// step_completed events, then runs the commit hooks.
func (c *Core) announce(stored []*steptype.Step, u *Update, now time.Time) {
	for i, s := range stored {
		c.Conv.Add(s)
		ev := u.Completed
		if ev == nil || i > 0 {
			ev = new(steptype.Event)
		}
		*ev = steptype.Event{Type: steptype.EventStepCompleted, StepName: s.Name, Step: s}
		if u.Hold && i == len(stored)-1 && s.Metadata["tool_attachments"] == nil {
			c.publishHeld(ev, now) // (a step's attachments are written after it)
		} else {
			c.PublishAt(ev, now)
		}
	}
	if len(stored) > 0 {
		c.Env.AfterCommit(stored)
	}
}

// stampMetrics makes every committed step say when its work started and how
// long it took: a step without times finished at its commit; a waiting step
// (a request) has only its start, its finish is set when it is resolved.
func stampMetrics(s *steptype.Step, now time.Time) {
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
