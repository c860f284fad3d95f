package stepwise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stepwise-run/stepwise/internal/broker"
	"github.com/stepwise-run/stepwise/internal/convo"
	"github.com/stepwise-run/stepwise/internal/ids"
	"github.com/stepwise-run/stepwise/internal/stepctx"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// Causes of an execution's cancellation that stop it without failing the
// run: the call in flight commits nothing, and the run is handed back to the
// queue to be resumed from its cursor (here, on another instance, or by the
// next `stepwise resume`). Only a per-step timeout or a genuine error of the
// call is ever recorded as a step.
var (
	// errDetached: the consumer of an inline execution stopped iterating.
	errDetached = errors.New("stepwise: execution detached by its consumer")
	// errShutdown: Engine.Stop (a graceful shutdown of the process).
	errShutdown = errors.New("stepwise: engine stopping")
	// errConsumerGone: the context of an inline execution was cancelled
	// (Ctrl-C or SIGTERM of the CLI, a caller giving up); it wraps the
	// context's cause.
	errConsumerGone = errors.New("stepwise: execution context cancelled")
)

// goneError is errConsumerGone with the cause of the consumer's context.
type goneError struct{ cause error }

func (g *goneError) Error() string        { return errConsumerGone.Error() + ": " + g.cause.Error() }
func (g *goneError) Is(target error) bool { return target == errConsumerGone }
func (g *goneError) Unwrap() error        { return g.cause }

// handedBack reports whether err stops an execution without failing its run.
func handedBack(err error) bool {
	return errors.Is(err, errDetached) || errors.Is(err, errShutdown) || errors.Is(err, errConsumerGone)
}

// interrupted reports whether the execution itself was stopped (shutdown,
// detach, cancel, lease lost): whatever is in flight then commits nothing.
// A per-step timeout cancels only the step's context, not this one.
func (x *execution) interrupted() bool { return context.Cause(x.ctx) != nil }

// execution is one process executing one run between a claim and a park or
// finish. It is the only writer of the run while it holds the lease.
type execution struct {
	e      *Engine
	agent  *Agent
	run    *Run          // current row; updated in memory after each commit
	topic  *broker.Topic // the session's broker topic, from acquire to release
	conv   *convo.Conversation
	ctx    context.Context
	cancel context.CancelCauseFunc
	// unwatch stops relaying the consumer's cancellation (inline runs).
	unwatch func() bool
	sink    *broker.Sink // inline consumer, nil for background runs
	// held is a step_completed event not sent to sink yet (publishHeld);
	// sinkMu orders the sends to sink (a handler's goroutines may publish).
	sinkMu sync.Mutex
	held   *Event
	parent *execution

	prevStepID  string
	lastSeq     int64
	lastAnswer  *Step
	replay      *replaySource
	approvals   map[string]ApprovalAnswer // tool-call id → decision
	waiting     map[string]bool           // tool-call id → a request is pending
	allowed     map[string]bool           // tools allowed for the session
	clientTools []llm.ToolDef             // tools the run's caller executes

	done chan struct{}       // closed by release
	fp   convo.Fingerprinter // request fingerprints' reused state
	defs []llm.ToolDef       // the agent's tool definitions, built once

	progress *Progress    // the run's last progress report (Scope.Progress)
	deltas   atomic.Int64 // deltas streamed, to detect a failed attempt's partial output

	mu sync.Mutex // guards run fields read by the heartbeat, and progress

	before int64 // load only steps before this sequence (a preview); 0: all

	// sessLock is the session's commit lock (referenced while loop runs).
	sessLock *broker.SessionLock
	// buf is what the execution keeps from one step to the next so that a
	// step allocates less.
	buf stepBuffers
}

// stepBuffers is the part of an execution that its steps reuse: store
// parameters, the built-in handlers, the scope and record of a lean step,
// and values a step would otherwise allocate each time (see
// docs/PERFORMANCE.md, "The durable step against its floor").
type stepBuffers struct {
	// storeCtx is the context of store writes, appendRuns StepAppend's
	// Runs, llmH and toolsH the built-in handlers.
	storeCtx     context.Context
	appendRuns   [1]*store.RunUpdateParams
	llmH, toolsH Handler
	calls        []ToolCall // toolsStep's calls
	boxes        [2]struct {
		v   string
		box any
	} // see boxed
	// commit's store parameters, reused: a store does not keep them.
	runParams    store.RunUpdateParams
	appendParams store.StepAppendParams
	one          [1]*Step // see one
	leanStep     Step     // see runStep
	leanScope    Scope
	builtNext    Next // see builtinNext
	priced       struct {
		model string
		price Price
		ok    bool
		set   bool
	} // see price
}

// expectRunning fences the writes of an execution (read only).
var expectRunning = []steptype.RunStatus{steptype.RunRunning}

// cursorLLM is the cursor of the built-in llm step (read only).
var cursorLLM = StepLLM

// one returns a slice holding just s, in a buffer of the execution that
// the next call reuses (commit keeps none of its steps slice).
func (x *execution) one(s *Step) []*Step {
	x.buf.one[0] = s
	return x.buf.one[:]
}

// boxed returns v as an interface value, the one of the previous call
// with the same slot when v is unchanged: a string in an interface is
// immutable, so steps can share it, and a model that answers with the same
// model name and finish reason every time costs no allocation for them.
func (x *execution) boxed(slot int, v string) any {
	b := &x.buf.boxes[slot]
	if b.v != v || b.box == nil {
		b.v, b.box = v, v
	}
	return b.box
}

// builtinNext returns n from a built-in step handler: in a buffer of the
// execution, which the next step reuses, when no hook can see (and keep)
// it — the loop and record read a Next only until the step is recorded —
// or else as a new one.
func (x *execution) builtinNext(name string, n Next) *Next {
	if x.hooks(name) {
		c := new(Next) // not &n: n would move to the heap on every call
		*c = n
		return c
	}
	x.buf.builtNext = n
	return &x.buf.builtNext
}

// load builds the in-memory context of the run from the store, once. A
// child run's context is its own steps; a top-level run's is the session's
// hop-0 thread, restored from a context checkpoint (see loadThread).
func (x *execution) load(ctx context.Context) error {
	sess, err := x.e.store.SessionGet(ctx, &store.SessionGetParams{ID: x.run.SessionID})
	if err != nil {
		return fmt.Errorf("load session: %w", err)
	}
	x.lastSeq = sess.LastSequence
	// The run's own steps: its approvals, pending requests, progress, last
	// answer and previous step (bounded by the run, not the session).
	var own []*Step
	if x.run.ID != "" && sess.LastSequence > 0 { // a session without steps has none of the run
		if own, err = x.e.store.StepList(ctx, &store.StepListParams{RunID: x.run.ID}); err != nil {
			return fmt.Errorf("load context: %w", err)
		}
	}
	x.approvals, x.waiting = map[string]ApprovalAnswer{}, map[string]bool{}
	for _, s := range own {
		x.noteRunInput(s)
		if x.run.Hop == 0 && s.Hop != 0 || x.before > 0 && s.Sequence >= x.before {
			continue
		}
		x.prevStepID = s.ID
		if s.Progress != nil {
			x.progress = s.Progress
		}
		if s.Kind == steptype.KindInput && s.Status == steptype.StepCompleted {
			x.lastAnswer = s
		}
	}
	if x.run.Hop > 0 {
		x.conv, x.allowed = convo.New(), map[string]bool{}
		for _, s := range own {
			if name, ok := allowedBy(s); ok {
				x.allowed[name] = true
			}
			if x.before > 0 && s.Sequence >= x.before {
				continue
			}
			x.conv.Add(s)
			if s.Kind == steptype.KindSystem && s.Name == "context" {
				x.conv.RestoreTrim(s)
			}
		}
	} else if err := x.loadThread(ctx, sess); err != nil {
		return fmt.Errorf("load context: %w", err)
	}
	if x.prevStepID == "" && x.run.ParentStepID != "" {
		x.prevStepID = x.run.ParentStepID
	}
	return x.loadReplay(ctx)
}

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

func (x *execution) runSnapshot() *Run {
	x.mu.Lock()
	defer x.mu.Unlock()
	r := *x.run
	return &r
}

// runUpdate is the run change committed with a step.
type runUpdate struct {
	cursor *string
	patch  json.RawMessage // state update, combined by the agent's reducers
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
		next, patch, err := x.agent.applyState(state, u.patch)
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

// conflict explains a failed fenced write: the run was cancelled, finished
// elsewhere, or its lease was taken.
func (x *execution) conflict(err error) error {
	r, gerr := x.e.store.RunGet(context.WithoutCancel(x.ctx), &store.RunGetParams{ID: x.run.ID})
	if gerr != nil {
		return fmt.Errorf("commit step: %w", err)
	}
	switch {
	case r.Status == steptype.RunCancelled:
		return ErrRunCancelled
	case r.Status.Terminal():
		return ErrRunFinished
	case r.LeaseOwner != x.e.cfg.Owner:
		return ErrLeaseLost
	}
	return fmt.Errorf("commit step: %w", err)
}

// loop executes steps until the run finishes, parks or is stopped.
func (x *execution) loop() error {
	x.sessLock = x.e.refSession(x.run.SessionID)
	defer func() {
		x.e.unrefSession(x.run.SessionID, x.sessLock)
		x.sessLock = nil
	}()
	defer x.flush()
	x.publish(&Event{Type: EventRunStarted, Run: x.runSnapshot()})
	if ended, err := x.upgrade(); ended || err != nil {
		if err != nil {
			return x.stopped(err)
		}
		return nil
	}
	for {
		cursor := x.run.Cursor
		if cursor == "" || cursor == StepEnd || x.run.StepCount >= int64(x.agent.Limits.MaxSteps) {
			x.flush() // a commit or the run's end comes next, not a step_started
		}
		if err := context.Cause(x.ctx); err != nil {
			x.flush()
			return x.stopped(err)
		}
		switch {
		case cursor == "":
			if err := x.commitInput(); err != nil {
				return x.stopped(err)
			}
			continue
		case cursor == StepEnd:
			return x.finish(steptype.RunCompleted, nil)
		case x.run.StepCount >= int64(x.agent.Limits.MaxSteps):
			serr := &StepError{Message: fmt.Sprintf("step budget of %d steps exhausted", x.agent.Limits.MaxSteps), Class: steptype.ErrorPermanent, Code: "max_steps"}
			if err := x.commit([]*Step{{Kind: steptype.KindError, Name: cursor, Status: steptype.StepFailed, Error: serr}}, runUpdate{}); err != nil {
				return x.stopped(err)
			}
			return x.finish(steptype.RunFailed, serr)
		}
		h := x.handler(cursor)
		if h == nil {
			x.flush()
			serr := &StepError{Message: fmt.Sprintf("step %q is not defined in agent %q (version %s); a renamed step is mapped with step_map", cursor, x.agent.Name, x.agent.Version), Class: steptype.ErrorPermanent, Code: "unknown_step"}
			return x.finish(steptype.RunFailed, serr)
		}
		next, serr, err := x.runStep(cursor, h)
		if err != nil {
			return x.stopped(err)
		}
		if serr != nil {
			return x.finish(steptype.RunFailed, serr)
		}
		if next.committed {
			if x.run.Status == steptype.RunWaiting {
				return nil
			}
			continue
		}
		parked, completed, err := x.record(cursor, next)
		if err != nil {
			return x.stopped(err)
		}
		if completed {
			return x.finished(steptype.RunCompleted, nil)
		}
		if parked {
			return nil
		}
	}
}

// commitInput records the user step of a new run and moves to the start step.
func (x *execution) commitInput() error {
	start := x.agent.StartStep
	s := &Step{Kind: steptype.KindUser, Name: "input", Role: steptype.RoleUser, Content: x.run.Input}
	s.Metrics.StartedAt, s.Metrics.FinishedAt = x.e.now(), x.e.now()
	return x.commit([]*Step{s}, runUpdate{cursor: &start})
}

func (x *execution) handler(name string) Handler {
	if h, ok := x.agent.Steps[name]; ok {
		return h
	}
	switch name {
	case StepLLM:
		if x.buf.llmH == nil {
			x.buf.llmH = StepFunc(x.llmStep)
		}
		return x.buf.llmH
	case StepTools:
		if x.buf.toolsH == nil {
			x.buf.toolsH = StepFunc(x.toolsStep)
		}
		return x.buf.toolsH
	}
	return nil
}

// scopedStep is a step's scope, record and step_started event in one
// allocation. (With the record's step_completed event too it would take
// the 1,152-byte size class instead of 896: more bytes than two objects.)
type scopedStep struct {
	Scope   Scope
	step    Step
	started Event
	dc      stepctx.Context // the handler's context (see call)
}

// leanStart is what a lean step (see runStep) allocates: its step_started
// event and its handler's context, in one allocation.
type leanStart struct {
	started Event
	dc      stepctx.Context
}

// runStep executes one step with the retry policy. It returns the handler's
// Next, or a StepError when the step failed for good (already recorded as
// error steps), or an engine error (cancelled, store failure).
func (x *execution) runStep(name string, h Handler) (*Next, *StepError, error) {
	pol := x.agent.Retry
	// The built-in tools step commits a step per call and never a record of
	// its own: when no hook and no observer can read its scope either, the
	// scope and its record are reused, without an id.
	lean := name == StepTools && x.agent.Steps[StepTools] == nil && !x.hooks(name) && x.e.eventsState() == nil
	for attempt := 1; ; attempt++ {
		scope, proc, dc := x.startAttempt(name, attempt, lean)
		streamed := x.deltas.Load()
		next, err := x.call(x.hooked(name, h), scope, proc, dc)
		if err == nil {
			if next, err = x.accept(name, scope, next); err == nil {
				return next, nil, nil
			}
		}
		if cause := context.Cause(x.ctx); cause != nil {
			return nil, nil, cause
		}
		if errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrStorageFull) {
			// The store failed, not the step (a tool result's commit): the
			// execution stops and the run is resumed once the store answers
			// (the executor takes the lease over) instead of failing.
			return nil, nil, err
		}
		serr, cerr := x.failAttempt(name, scope, attempt, x.deltas.Load() != streamed, err)
		if cerr != nil {
			return nil, nil, cerr
		}
		if !serr.Recoverable {
			return nil, serr, nil
		}
		if err := sleepCtx(x.ctx, backoffDelay(pol, attempt, llm.RetryAfter(err))); err != nil {
			return nil, nil, context.Cause(x.ctx)
		}
	}
}

// startAttempt prepares an attempt of a step, its scope and record (lean:
// the execution's reused ones) and the zero context of its handler, and
// publishes its step_started event. It returns the reading of the clock
// its timeout counts from (zero: from now).
func (x *execution) startAttempt(name string, attempt int, lean bool) (*Scope, time.Time, *stepctx.Context) {
	// One reading of the clock for the step's start, its id's timestamp
	// and the start of its timeout (proc: zero with a clock of the
	// caller's, and then each reads its own).
	startedAt, proc := x.e.nowRead()
	var scope *Scope
	var started *Event
	var dc *stepctx.Context
	if lean {
		x.buf.leanStep = Step{Name: name}
		x.buf.leanScope = Scope{exec: x, name: name, step: &x.buf.leanStep}
		ls := new(leanStart)
		scope, started, dc = &x.buf.leanScope, &ls.started, &ls.dc
	} else {
		ss := &scopedStep{Scope: Scope{exec: x, name: name}, step: Step{ID: ids.At(proc), Name: name}}
		ss.Scope.step = &ss.step
		scope, started, dc = &ss.Scope, &ss.started, &ss.dc
	}
	scope.step.Metrics.Attempt = attempt
	scope.step.Metrics.StartedAt = startedAt
	started.Type, started.StepName = EventStepStarted, name
	if x.publishWaited(started, startedAt) {
		// The consumer held the step back: its timeout counts from
		// now, as it did when it was read after the publish.
		proc = time.Time{}
	}
	return scope, proc, dc
}

// accept checks what a handler returned (a state update that applies, a
// route to a step of the agent) and makes the scope's record the step's
// record; an error fails the attempt.
func (x *execution) accept(name string, scope *Scope, next *Next) (*Next, error) {
	if next != nil && next.State != nil && !next.committed {
		if err := x.checkState(next.State); err != nil {
			return nil, err
		}
	}
	if next == nil || (!next.committed && !x.agent.hasStep(next.Step)) {
		got := "<nil>"
		if next != nil {
			got = next.Step
		}
		return nil, fmt.Errorf("%w: step %q routed to %q", ErrUnknownStep, name, got)
	}
	if next.record != nil {
		next.record.ID = scope.step.ID
	}
	if next.record == nil && !next.committed {
		next.record = scope.step
	}
	if len(scope.hookTrail) > 0 && next.record != nil {
		if next.record.Metadata == nil {
			next.record.Metadata = map[string]any{}
		}
		next.record.Metadata["hooks"] = scope.hookTrail
	}
	return next, nil
}

// failAttempt records a failed attempt as an error step, telling
// subscribers first to discard what it streamed (streamed), and returns
// its StepError, Recoverable when the policy retries it.
func (x *execution) failAttempt(name string, scope *Scope, attempt int, streamed bool, err error) (*StepError, error) {
	class, code := classify(err)
	retry := class == steptype.ErrorTransient && attempt < x.agent.Retry.MaxAttempts
	serr := &StepError{Message: err.Error(), Class: class, Attempt: attempt, Recoverable: retry, Code: code}
	if cause := errors.Unwrap(err); cause != nil {
		serr.Cause = cause.Error()
	}
	es := &Step{Kind: steptype.KindError, Name: name, Status: steptype.StepFailed, Error: serr}
	es.Metrics.Attempt = attempt
	es.Metrics.StartedAt, es.Metrics.FinishedAt = scope.step.Metrics.StartedAt, x.e.now()
	es.Metrics.Duration = es.Metrics.FinishedAt.Sub(es.Metrics.StartedAt)
	if m := x.agent.Model; m != nil && name == StepLLM {
		es.Metrics.Model = m.Name()
	}
	if streamed {
		// The attempt streamed output that no step will carry: tell
		// subscribers to discard it before anything else of the step.
		x.publish(&Event{Type: EventStepReset, StepName: name, Reset: &Reset{Attempt: attempt, Reason: serr.Message, Retrying: retry}})
	}
	if err := x.commit([]*Step{es}, runUpdate{}); err != nil {
		return nil, err
	}
	return serr, nil
}

// classify returns the error class and code of a failed attempt.
func classify(err error) (steptype.ErrorClass, string) {
	class := llm.Classify(err)
	code := "step_error"
	switch {
	case errors.Is(err, ErrStepTimeout):
		class, code = steptype.ErrorTransient, "timeout"
	case errors.Is(err, ErrStepPanic):
		class, code = steptype.ErrorPermanent, "panic"
	case errors.Is(err, ErrUnknownStep):
		class, code = steptype.ErrorPermanent, "unknown_step"
	case errors.Is(err, ErrInvalidState):
		class, code = steptype.ErrorPermanent, "invalid_state"
	}
	var le *llm.Error
	if errors.As(err, &le) && le.Code != "" {
		code = le.Code
	}
	return class, code
}

// call runs a handler under the step timeout, turning a panic into an error.
// The timeout counts from start (a reading of time.Now), or from now when
// start is zero. dc is the zero context the step allocated for it.
func (x *execution) call(h Handler, s *Scope, start time.Time, dc *stepctx.Context) (next *Next, err error) {
	// What context.WithTimeoutCause(x.ctx, StepTimeout, ErrStepTimeout)
	// answers, made only when the handler needs it (see stepctx.Context).
	dc.Init(x.ctx, start, x.agent.Limits.StepTimeout, ErrStepTimeout)
	defer dc.End()
	ctx := x.observeStepContext(dc, s)
	defer func() {
		if r := recover(); r != nil {
			next, err = nil, fmt.Errorf("%w: %v\n%s", ErrStepPanic, r, debug.Stack())
		}
	}()
	next, err = h.HandleStep(ctx, s)
	if err != nil && errors.Is(context.Cause(ctx), ErrStepTimeout) && x.ctx.Err() == nil {
		err = fmt.Errorf("%w after %s: %w", ErrStepTimeout, x.agent.Limits.StepTimeout, err)
	}
	return next, err
}

// record commits the step a handler produced, with the cursor move and state
// patch. It reports whether the run parked waiting for input, or completed
// with the step (its cursor moved to the end: see runUpdate.completes).
func (x *execution) record(name string, next *Next) (parked, completed bool, err error) {
	s := next.record
	if s.Kind == "" {
		s.Kind = steptype.KindCustom
		if next.Decision != nil {
			s.Kind = steptype.KindDecision
		}
	}
	if !next.Annotations.IsZero() {
		s.Annotations = next.Annotations
	}
	if s.Content == "" {
		s.Content = next.Content
	}
	// The built-in llm step's record is the engine's own unless a hook
	// could read it (Scope.Record).
	u := runUpdate{cursor: &next.Step, inPlace: name == StepLLM && x.agent.Steps[StepLLM] == nil && !x.hooks(name),
		hold: next.Input == nil} // no park: the loop goes on
	if next.Step == StepEnd && next.Input == nil {
		// The loop would finish the run next, with nothing in between but
		// the held event: the step's commit completes it (one transaction).
		u.completes, u.hold = true, false
	}
	if next.State != nil {
		patch, err := toRaw(next.State)
		if err != nil {
			return false, false, fmt.Errorf("step %q state: %w", name, err)
		}
		s.StatePatch, u.patch, u.patchStep = patch, patch, s
	}
	if next.Output != nil {
		out, err := toRaw(next.Output)
		if err != nil {
			return false, false, fmt.Errorf("step %q output: %w", name, err)
		}
		s.Outputs = out
	}
	if next.Decision != nil {
		in, _ := json.Marshal(map[string]any{"purpose": next.Decision.Purpose, "options": next.Decision.Options})
		out, _ := json.Marshal(map[string]any{"choice": next.Decision.Choice})
		s.Inputs, s.Outputs = in, out
	}
	if s.Metrics.FinishedAt.IsZero() {
		s.Metrics.FinishedAt = x.e.now()
		s.Metrics.Duration = s.Metrics.FinishedAt.Sub(s.Metrics.StartedAt)
	}
	steps := x.one(s) // an input step is appended to a copy (cap 1)
	if next.Input != nil {
		in, err := x.inputStep(name, next.Input, nil)
		if err != nil {
			return false, false, err
		}
		steps = append(steps, in)
		waiting := steptype.RunWaiting
		u.status = &waiting
	}
	if err := x.commit(steps, u); err != nil {
		return false, false, err
	}
	if u.completes {
		x.flush()
		return false, true, nil
	}
	if u.status != nil {
		x.publish(&Event{Type: EventRunWaiting, Run: x.runSnapshot()})
		return true, false, nil
	}
	return false, false, nil
}

// outputWith is the run's output once steps are committed: the content of
// the last assistant message, as lastAssistantText reads it after the
// steps are added to the context.
func (x *execution) outputWith(steps []*Step) string {
	for i := len(steps) - 1; i >= 0; i-- {
		if s := steps[i]; convo.InContext(s) && s.Role == steptype.RoleAssistant {
			return s.Content
		}
	}
	return x.lastAssistantText()
}

// finish ends the run.
func (x *execution) finish(status steptype.RunStatus, serr *StepError) error {
	out := x.lastAssistantText()
	if err := x.commit(nil, runUpdate{status: &status, output: &out, err: serr, finish: true}); err != nil {
		return x.stopped(err)
	}
	return x.finished(status, serr)
}

// finished announces a run whose finish has committed.
func (x *execution) finished(status steptype.RunStatus, serr *StepError) error {
	x.publish(&Event{Type: EventRunFinished, Run: x.runSnapshot()})
	x.e.observeRunFinished(x.runSnapshot(), serr)
	if status == steptype.RunCompleted {
		return x.queueNextTurn()
	}
	return nil
}

// stopped handles an execution that cannot continue: a detached consumer,
// a shutdown or a cancelled consumer context hands the run back to the queue
// (nothing of the step in flight was committed); a cancelled run just stops;
// other errors are returned.
func (x *execution) stopped(err error) error {
	switch {
	case handedBack(err):
		x.handBack()
		var g *goneError
		if errors.As(err, &g) {
			return g.cause // the caller cancelled its context: say so
		}
		return nil
	case errors.Is(err, ErrRunCancelled):
		return nil
	}
	return err
}

// handBack returns the run to the queue and releases its lease, so that the
// next claim (here, elsewhere, or `stepwise resume`) continues it at once.
func (x *execution) handBack() {
	queued := steptype.RunQueued
	_, err := x.e.store.RunUpdate(context.WithoutCancel(x.ctx), &store.RunUpdateParams{
		ID: x.run.ID, Owner: x.e.cfg.Owner, ExpectStatus: []steptype.RunStatus{steptype.RunRunning},
		Status: &queued, ClearLease: true, Now: x.e.now(),
	})
	if err == nil {
		x.mu.Lock()
		x.run.Status = queued
		x.mu.Unlock()
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

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
