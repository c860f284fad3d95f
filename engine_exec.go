package stepwise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/stepwise-run/stepwise/internal/runexec"

	"github.com/stepwise-run/stepwise/internal/ids"
	"github.com/stepwise-run/stepwise/internal/stepctx"
	"github.com/stepwise-run/stepwise/internal/stepres"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// loop executes steps until the run finishes, parks or is stopped.
func (x *execution) loop() error {
	x.SessLock = x.e.refSession(x.Run.SessionID)
	defer func() {
		x.e.unrefSession(x.Run.SessionID, x.SessLock)
		x.SessLock = nil
	}()
	defer x.Flush()
	x.Publish(&Event{Type: EventRunStarted, Run: x.RunSnapshot()})
	if ended, err := x.upgrade(); ended || err != nil {
		if err != nil {
			return x.Stopped(err)
		}
		return nil
	}
	if err := x.applyBreakEdit(); err != nil {
		return x.Stopped(err)
	}
	for {
		cursor := x.Run.Cursor
		if cursor == "" || cursor == StepEnd || x.Run.StepCount >= int64(x.agent.Limits.MaxSteps) {
			x.Flush() // a commit or the run's end comes next, not a step_started
		}
		if err := context.Cause(x.Ctx); err != nil {
			x.Flush()
			return x.Stopped(err)
		}
		switch {
		case cursor == "":
			if err := x.commitInput(); err != nil {
				return x.Stopped(err)
			}
			continue
		case cursor == StepEnd:
			return x.finish(steptype.RunCompleted, nil)
		case x.Run.StepCount >= int64(x.agent.Limits.MaxSteps):
			serr := &StepError{Message: fmt.Sprintf("step budget of %d steps exhausted", x.agent.Limits.MaxSteps), Class: steptype.ErrorPermanent, Code: "max_steps"}
			if err := x.Commit([]*Step{{Kind: steptype.KindError, Name: cursor, Status: steptype.StepFailed, Error: serr}}, runexec.Update{}); err != nil {
				return x.Stopped(err)
			}
			return x.finish(steptype.RunFailed, serr)
		}
		h := x.handler(cursor)
		if h == nil {
			x.Flush()
			serr := &StepError{Message: fmt.Sprintf("step %q is not defined in agent %q (version %s); a renamed step is mapped with step_map", cursor, x.agent.Name, x.agent.Version), Class: steptype.ErrorPermanent, Code: "unknown_step"}
			return x.finish(steptype.RunFailed, serr)
		}
		if x.bp != nil {
			if paused, err := x.pauseBefore(cursor); paused || err != nil {
				return x.Stopped(err)
			}
		}
		next, serr, err := x.runStep(cursor, h)
		if err != nil {
			return x.Stopped(err)
		}
		if serr != nil {
			return x.finish(steptype.RunFailed, serr)
		}
		if next.committed {
			if x.Run.Status == steptype.RunWaiting {
				return nil
			}
			if x.bp != nil {
				if paused, err := x.pauseAfter(cursor, x.stepKind(cursor)); paused || err != nil {
					return x.Stopped(err)
				}
			}
			continue
		}
		parked, completed, err := x.record(cursor, next)
		if err != nil {
			return x.Stopped(err)
		}
		if completed {
			return x.finished(steptype.RunCompleted, nil)
		}
		if parked {
			return nil
		}
		if x.bp != nil {
			if paused, err := x.pauseAfter(cursor, next.record.Kind); paused || err != nil {
				return x.Stopped(err)
			}
		}
	}
}

// commitInput records the user step of a new run and moves to the start step.
func (x *execution) commitInput() error {
	start := x.agent.StartStep
	s := &Step{Kind: steptype.KindUser, Name: "input", Role: steptype.RoleUser, Content: x.Run.Input}
	s.Metrics.StartedAt, s.Metrics.FinishedAt = x.e.now(), x.e.now()
	return x.Commit([]*Step{s}, runexec.Update{Cursor: &start})
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
	// The built-in tools step records a step per call, each measured
	// around its call (execCall); it records none of its own.
	measure := (name != StepTools || x.agent.Steps[StepTools] != nil) && !x.e.cfg.NoStepResources
	for attempt := 1; ; attempt++ {
		scope, proc, dc := x.startAttempt(name, attempt, lean)
		streamed := x.Deltas.Load()
		var mark stepres.Mark
		if measure {
			mark = stepres.Start()
		}
		next, err := x.call(x.hooked(name, h), scope, proc, dc)
		runexec.SetUsage(&scope.step.Metrics, mark.End())
		if err == nil {
			if next, err = x.accept(name, scope, next); err == nil {
				return next, nil, nil
			}
		}
		if cause := context.Cause(x.Ctx); cause != nil {
			return nil, nil, cause
		}
		if errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrStorageFull) {
			// The store failed, not the step (a tool result's commit): the
			// execution stops and the run is resumed once the store answers
			// (the executor takes the lease over) instead of failing.
			return nil, nil, err
		}
		serr, cerr := x.failAttempt(name, scope, attempt, x.Deltas.Load() != streamed, err)
		if cerr != nil {
			return nil, nil, cerr
		}
		if !serr.Recoverable {
			return nil, serr, nil
		}
		if err := runexec.Sleep(x.Ctx, pol.exec().Backoff(attempt, llm.RetryAfter(err))); err != nil {
			return nil, nil, context.Cause(x.Ctx)
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
	if x.PublishWaited(started, startedAt) {
		// The consumer held the step back: its timeout counts from
		// now, as it did when it was read after the publish.
		proc = time.Time{}
	}
	return scope, proc, dc
}

// copyUsage copies the resource use of from to m.
func copyUsage(m, from *steptype.Metrics) {
	m.CPUTime, m.AllocBytes, m.AllocObjects, m.OverlappingSteps = from.CPUTime, from.AllocBytes, from.AllocObjects, from.OverlappingSteps
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
		if next.record != scope.step {
			copyUsage(&next.record.Metrics, &scope.step.Metrics)
		}
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
	copyUsage(&es.Metrics, &scope.step.Metrics)
	es.Metrics.StartedAt, es.Metrics.FinishedAt = scope.step.Metrics.StartedAt, x.e.now()
	es.Metrics.Duration = es.Metrics.FinishedAt.Sub(es.Metrics.StartedAt)
	if m := x.agent.Model; m != nil && name == StepLLM {
		es.Metrics.Model = m.Name()
	}
	if streamed {
		// The attempt streamed output that no step will carry: tell
		// subscribers to discard it before anything else of the step.
		x.Publish(&Event{Type: EventStepReset, StepName: name, Reset: &Reset{Attempt: attempt, Reason: serr.Message, Retrying: retry}})
	}
	if err := x.Commit([]*Step{es}, runexec.Update{}); err != nil {
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
	// What context.WithTimeoutCause(x.Ctx, StepTimeout, ErrStepTimeout)
	// answers, made only when the handler needs it (see stepctx.Context).
	dc.Init(x.Ctx, start, x.agent.Limits.StepTimeout, ErrStepTimeout)
	defer dc.End()
	ctx := x.observeStepContext(dc, s)
	defer func() {
		if r := recover(); r != nil {
			next, err = nil, fmt.Errorf("%w: %v\n%s", ErrStepPanic, r, debug.Stack())
		}
	}()
	next, err = h.HandleStep(ctx, s)
	if err != nil && errors.Is(context.Cause(ctx), ErrStepTimeout) && x.Ctx.Err() == nil {
		err = fmt.Errorf("%w after %s: %w", ErrStepTimeout, x.agent.Limits.StepTimeout, err)
	}
	return next, err
}

// record commits the step a handler produced, with the cursor move and state
// patch. It reports whether the run parked waiting for input, or completed
// with the step (its cursor moved to the end: see runexec.Update.completes).
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
	u := runexec.Update{Cursor: &next.Step, InPlace: name == StepLLM && x.agent.Steps[StepLLM] == nil && !x.hooks(name),
		Hold: next.Input == nil} // no park: the loop goes on
	if next.Step == StepEnd && next.Input == nil && (x.bp == nil || x.breakAfter(name, s.Kind) == "") {
		// The loop would finish the run next, with nothing in between but
		// the held event: the step's commit completes it (one transaction).
		u.Completes, u.Hold = true, false
	}
	if next.State != nil {
		patch, err := toRaw(next.State)
		if err != nil {
			return false, false, fmt.Errorf("step %q state: %w", name, err)
		}
		s.StatePatch, u.Patch, u.PatchStep = patch, patch, s
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
	steps := x.One(s) // an input step is appended to a copy (cap 1)
	if next.Input != nil {
		in, err := x.inputStep(name, next.Input, nil)
		if err != nil {
			return false, false, err
		}
		steps = append(steps, in)
		waiting := steptype.RunWaiting
		u.Status = &waiting
	}
	if err := x.Commit(steps, u); err != nil {
		return false, false, err
	}
	if u.Completes {
		x.Flush()
		return false, true, nil
	}
	if u.Status != nil {
		x.Publish(&Event{Type: EventRunWaiting, Run: x.RunSnapshot()})
		return true, false, nil
	}
	return false, false, nil
}

// finish ends the run.
func (x *execution) finish(status steptype.RunStatus, serr *StepError) error {
	out := x.OutputWith(nil)
	if err := x.Commit(nil, runexec.Update{Status: &status, Output: &out, Err: serr, Finish: true}); err != nil {
		return x.Stopped(err)
	}
	return x.finished(status, serr)
}

// finished announces a run whose finish has committed.
func (x *execution) finished(status steptype.RunStatus, serr *StepError) error {
	x.Publish(&Event{Type: EventRunFinished, Run: x.RunSnapshot()})
	x.e.observeRunFinished(x.RunSnapshot(), serr)
	if status == steptype.RunCompleted {
		return x.queueNextTurn()
	}
	return nil
}
