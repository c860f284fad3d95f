package stepwise

import (
	"context"

	"github.com/stepwise-run/stepwise/internal/observation"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/tool"
)

// The types of observation are defined in internal/observation, with the
// machinery that delivers them; these aliases make them part of the root
// API.
type (
	// Observer is told about committed steps and finished runs:
	// evaluators, OpenTelemetry exporters, background summarizers. It is
	// never on a run's critical path: each observer registered with
	// Engine.Observe has its own queue and goroutine, receives its calls in
	// commit order, and may take its time; when its queue is full, calls
	// are dropped (and logged), the run is never slowed. The step and run
	// are shared: an observer must not modify them.
	Observer = observation.Observer
	// StepEventObserver is implemented by observers that also want the
	// events inside steps (provider requests and responses, tool
	// invocations, HTTP exchanges, sub-calls). An event is delivered before
	// the commit of its step; the step may also never commit (a crash, a
	// cancelled attempt).
	StepEventObserver = observation.StepEventObserver
	// StepRef identifies the step an event belongs to. Model calls and
	// custom steps know the id their step will be committed with (StepID);
	// a tool call is identified by its ToolCallID and becomes the tool step
	// that carries it.
	StepRef = observation.StepRef
	// StepEvent is a fine-grained event inside a step, as recorded.
	// Payload is any value that marshals to JSON; observers marshal it off
	// the critical path, so it must not change after it was recorded.
	StepEvent = observation.StepEvent
	// ToolInvocation is the payload of a tool_invocation event.
	ToolInvocation = observation.ToolInvocation
	// MaskFunc rewrites a step before it is persisted, e.g. to mask
	// personal data. It runs on the run's critical path, for every step,
	// before the commit; the committed (masked) step is also what later
	// model calls see. Identity fields (ids, sequence, kind, status) are
	// restored after it runs.
	MaskFunc = observation.MaskFunc
)

// Step event types recorded by the engine and by observe.Transport.
const (
	StepEventProviderRequest  = observation.StepEventProviderRequest  // Payload: *llm.Request
	StepEventProviderResponse = observation.StepEventProviderResponse // Payload: *llm.Response (nil on error)
	StepEventToolInvocation   = observation.StepEventToolInvocation   // Payload: *ToolInvocation
	StepEventHTTP             = observation.StepEventHTTP             // an HTTP exchange of a step
)

// observation returns e's state, creating it when create is set; nil when
// nothing was ever registered.
func (e *Engine) observation(create bool) *observation.State {
	if create {
		e.obsOnce.Do(func() {
			st := observation.New(e.cfg.Logger)
			// Committed steps come through the commit hook.
			e.OnCommit(func(s *Step) { e.observeStep(st, s) })
			e.obs.Store(st)
		})
	}
	return e.obs.Load()
}

// observing returns e's state when something is registered.
func (e *Engine) observing() *observation.State {
	if st := e.observation(false); st != nil && st.Any() {
		return st
	}
	return nil
}

// Observe registers an observer and returns a function that unregisters it
// after delivering what is already queued.
func (e *Engine) Observe(o Observer) (stop func()) { return e.observation(true).Observe(o) }

// Mask registers a mask function, applied to every step before it is
// persisted, after the ones registered before it.
func (e *Engine) Mask(fn MaskFunc) { e.observation(true).Mask(fn) }

// FlushObservers waits until every observer has handled what was queued
// before the call, or ctx ends.
func (e *Engine) FlushObservers(ctx context.Context) error {
	if st := e.observation(false); st != nil {
		return st.Flush(ctx)
	}
	return nil
}

// stopObservers unregisters every observer after delivering what is queued.
func (e *Engine) stopObservers() {
	if st := e.observation(false); st != nil {
		st.Stop()
	}
}

// maskSteps applies the mask functions to steps about to be committed. A
// panicking mask fails the commit: unmasked content is never persisted.
func (e *Engine) maskSteps(steps []*Step) error {
	if st := e.observing(); st != nil {
		return st.MaskSteps(steps)
	}
	return nil
}

// maskInput masks the input of a new run, as the content of its user step.
func (e *Engine) maskInput(input string) (string, error) {
	s := &Step{Kind: steptype.KindUser, Role: steptype.RoleUser, Content: input}
	if err := e.maskSteps([]*Step{s}); err != nil {
		return "", err
	}
	return s.Content, nil
}

// observeStep queues a committed step for the observers, with a snapshot of
// its run. It is called through OnCommit, inside the session's commit lock:
// it only queues.
func (e *Engine) observeStep(st *observation.State, s *Step) {
	if !st.Any() {
		return
	}
	e.mu.Lock()
	x := e.active[s.RunID]
	e.mu.Unlock()
	r := &Run{ID: s.RunID, SessionID: s.SessionID}
	if x != nil {
		r = x.RunSnapshot()
	}
	st.StepCommitted(r, s)
}

// observeRunFinished queues a finished run for the observers. serr is the
// run's error when the in-memory row does not carry it yet.
func (e *Engine) observeRunFinished(r *Run, serr *StepError) {
	st := e.observing()
	if st == nil {
		return
	}
	c := *r
	if c.Error == nil {
		c.Error = serr
	}
	if c.FinishedAt.IsZero() {
		c.FinishedAt = c.UpdatedAt
	}
	st.RunFinished(&c)
}

// StepRefFromContext returns the step ctx executes: set for the context of
// a custom step handler, a model call and a tool call while an observer
// that records step events is registered.
func StepRefFromContext(ctx context.Context) (StepRef, bool) { return observation.RefFromContext(ctx) }

// RecordStepEvent records ev as an event inside the step ctx executes (see
// StepRefFromContext), e.g. an API call a tool makes. Its StepRef is taken
// from ctx and Time defaults to now. It reports whether the event was
// recorded: false when ctx executes no step or no observer records events.
func RecordStepEvent(ctx context.Context, ev *StepEvent) bool {
	return observation.RecordFromContext(ctx, ev)
}

// StepContext returns ctx marked as executing the step ref, so that
// RecordStepEvent and observe.Transport attach events to it, for code that
// executes part of a step outside the engine's own calls. The events reach
// e's observers; they are kept for the step that commits with ref's StepID
// (or answers its ToolCallID). ctx is returned unchanged when no observer
// records step events.
func (e *Engine) StepContext(ctx context.Context, ref StepRef) context.Context {
	if st := e.eventsState(); st != nil {
		return observation.WithStep(ctx, st, ref)
	}
	return ctx
}

// eventsState returns e's state when an observer records step events.
func (e *Engine) eventsState() *observation.State {
	if st := e.observing(); st != nil && st.Events() {
		return st
	}
	return nil
}

// observeStepContext marks ctx as executing the step of scope s, so that
// handlers (and what they call) can record step events.
func (x *execution) observeStepContext(ctx context.Context, s *Scope) context.Context {
	st := x.e.eventsState()
	if st == nil {
		return ctx
	}
	return observation.WithStep(ctx, st, StepRef{
		SessionID: x.Run.SessionID, RunID: x.Run.ID, StepID: s.step.ID, StepName: s.name, Attempt: s.step.Metrics.Attempt,
	})
}

// RecordsEvents reports whether an observer records step events.
func (x *execution) RecordsEvents() bool { return x.e.eventsState() != nil }

// ObserveModel wraps the model of an llm step so that its request and final
// response are recorded as events of step, and HTTP transports see the step
// in the call's context.
func (x *execution) ObserveModel(m llm.Model, step *Step) llm.Model {
	st := x.e.eventsState()
	if st == nil {
		return m
	}
	return st.Model(m, StepRef{SessionID: x.Run.SessionID, RunID: x.Run.ID, StepID: step.ID, StepName: step.Name, Attempt: step.Metrics.Attempt})
}

// observeTool wraps a tool so that each call is recorded as a
// tool_invocation event of its tool step.
func (x *execution) observeTool(t tool.Tool) tool.Tool {
	if st := x.e.eventsState(); st != nil {
		return st.Tool(t, StepTools)
	}
	return t
}
