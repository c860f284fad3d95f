package runexec

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stepwise-run/stepwise/internal/broker"
	"github.com/stepwise-run/stepwise/internal/convo"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// Env is what the executions of one engine share.
type Env struct {
	Store  store.Store
	Broker *broker.Broker
	// Owner is the lease owner of the engine's executions.
	Owner string
	// Now reads the engine's clock; NowRead reads it together with the
	// process clock (proc), which step ids are made from.
	Now     func() time.Time
	NowRead func() (now, proc time.Time)
	// LockSession takes a session's commit lock for an execution that
	// holds no reference to it (Core.SessLock), returning its release.
	LockSession func(sessionID string) (unlock func())
	// Mask masks steps before they are written (the engine's mask
	// functions); AfterCommit runs the engine's commit hooks and
	// observers over committed steps.
	Mask        func([]*steptype.Step) error
	AfterCommit func([]*steptype.Step)
}

// Unit is what a Core needs of the execution that embeds it.
type Unit interface {
	// ApplyPatch combines a state update with the run's state by the
	// agent's reducers (edit: a merge patch applied as is), returning the
	// new state and the effective merge patch.
	ApplyPatch(state, patch json.RawMessage, edit bool) (next, effective json.RawMessage, err error)
	// LastAssistantText is the content of the latest assistant message of
	// the run's whole context.
	LastAssistantText() string
	// RecordsEvents reports whether an observer records step events;
	// ObserveModel wraps a model so that its calls are events of step.
	RecordsEvents() bool
	ObserveModel(m llm.Model, step *steptype.Step) llm.Model
}

// Core is one process executing one run between a claim and a park or
// finish: the only writer of the run while it holds the lease.
type Core struct {
	Env  *Env
	Unit Unit
	// Run is the current row, updated in memory after each commit; Mu
	// guards the fields the lease heartbeat reads, and Progress.
	Run      *steptype.Run
	Mu       sync.Mutex
	Progress *steptype.Progress // the run's last progress report
	// Topic is the session's broker topic, from acquire to release.
	Topic *broker.Topic
	Conv  *convo.Conversation
	// Ctx is cancelled with a cause when the execution stops; Unwatch
	// stops relaying the consumer's cancellation (inline runs).
	Ctx     context.Context
	Cancel  context.CancelCauseFunc
	Unwatch func() bool
	// Sink is the inline consumer, nil for background runs.
	Sink *broker.Sink
	// SessLock is the session's commit lock, referenced while the loop runs.
	SessLock *broker.SessionLock
	// PrevStepID is the parent of the next step; LastSeq the session's
	// last sequence when the run was loaded.
	PrevStepID string
	LastSeq    int64
	// Deltas counts the deltas streamed, to detect a failed attempt's
	// partial output.
	Deltas atomic.Int64

	// held is a step_completed event not sent to Sink yet (publishHeld);
	// sinkMu orders the sends to Sink (a handler's goroutines may publish).
	sinkMu sync.Mutex
	held   *steptype.Event
	// customOut is the content of the run's last custom step when no
	// assistant message came after it (see OutputWith); sawAssistant is
	// set once the run committed an assistant message.
	customOut    string
	sawAssistant bool

	// The store parameters of commits, reused: a store keeps none of them.
	storeCtx     context.Context
	appendRuns   [1]*store.RunUpdateParams
	runParams    store.RunUpdateParams
	appendParams store.StepAppendParams
	one          [1]*steptype.Step
	// model is what its model calls reuse.
	model modelBuffers
}

// expectRunning fences the writes of an execution (read only).
var expectRunning = []steptype.RunStatus{steptype.RunRunning}

// One returns a slice holding just s, in a buffer of the execution that
// the next call reuses (Commit keeps none of its steps slice).
func (c *Core) One(s *steptype.Step) []*steptype.Step {
	c.one[0] = s
	return c.one[:]
}

// RunSnapshot returns a copy of the run row.
func (c *Core) RunSnapshot() *steptype.Run {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	r := *c.Run
	return &r
}

// Conflict explains a failed fenced write: the run was cancelled, finished
// elsewhere, or its lease was taken.
func (c *Core) Conflict(err error) error {
	r, gerr := c.Env.Store.RunGet(context.WithoutCancel(c.Ctx), &store.RunGetParams{ID: c.Run.ID})
	if gerr != nil {
		return fmt.Errorf("commit step: %w", err)
	}
	switch {
	case r.Status == steptype.RunCancelled:
		return ErrRunCancelled
	case r.Status.Terminal():
		return wire.ErrRunFinished
	case r.LeaseOwner != c.Env.Owner:
		return ErrLeaseLost
	}
	return fmt.Errorf("commit step: %w", err)
}

// LeaseRefused stops the execution whose lease renewal the store refused.
func (c *Core) LeaseRefused() { c.Cancel(c.Conflict(store.ErrConflict)) }

// HandBack returns the run to the queue and releases its lease, so that the
// next claim (here, elsewhere, or `stepwise resume`) continues it at once.
func (c *Core) HandBack() {
	queued := steptype.RunQueued
	_, err := c.Env.Store.RunUpdate(context.WithoutCancel(c.Ctx), &store.RunUpdateParams{
		ID: c.Run.ID, Owner: c.Env.Owner, ExpectStatus: expectRunning,
		Status: &queued, ClearLease: true, Now: c.Env.Now(),
	})
	if err == nil {
		c.Mu.Lock()
		c.Run.Status = queued
		c.Mu.Unlock()
	}
}

// OutputWith is the run's output once steps are committed: the content of
// the last assistant message, as LastAssistantText reads it after the
// steps are added to the context — or of the run's last custom step with
// content when the run has no assistant message (a run of custom steps
// only ends with what its last step said).
func (c *Core) OutputWith(steps []*steptype.Step) string {
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		if convo.InContext(s) && s.Role == steptype.RoleAssistant {
			return s.Content
		}
	}
	if !c.sawAssistant {
		for i := len(steps) - 1; i >= 0; i-- {
			if customOutput(steps[i]) {
				return steps[i].Content
			}
		}
		if c.customOut != "" {
			return c.customOut
		}
	}
	return c.Unit.LastAssistantText()
}

// customOutput reports whether s is a custom step whose content may be the
// run's output: one with content outside the model context.
func customOutput(s *steptype.Step) bool {
	return s.Kind == steptype.KindCustom && s.Content != "" && !convo.InContext(s)
}

// NoteOutput follows the run's output through a step of the run that
// committed: a custom step's content until an assistant message comes
// after it.
func (c *Core) NoteOutput(s *steptype.Step) {
	switch {
	case convo.InContext(s) && s.Role == steptype.RoleAssistant:
		c.customOut, c.sawAssistant = "", true
	case customOutput(s):
		c.customOut = s.Content
	}
}
