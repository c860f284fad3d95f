package stepwise

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stepwise-run/stepwise/internal/obsqueue"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/tool"
)

// Observer is told about committed steps and finished runs: evaluators,
// OpenTelemetry exporters, background summarizers. It is never on a run's
// critical path: each observer registered with Engine.Observe has its own
// queue and goroutine, receives its calls in commit order, and may take its
// time; when its queue is full, calls are dropped (and logged), the run is
// never slowed. The step and run are shared: an observer must not modify
// them.
type Observer interface {
	// StepCommitted is called after s was committed; r is the run as of
	// that commit.
	StepCommitted(ctx context.Context, r *Run, s *Step)
	// RunFinished is called after r reached a terminal status (completed,
	// failed, cancelled).
	RunFinished(ctx context.Context, r *Run)
}

// StepEventObserver is implemented by observers that also want the events
// inside steps (provider requests and responses, tool invocations, HTTP
// exchanges, sub-calls). An event is delivered before the commit of its
// step; the step may also never commit (a crash, a cancelled attempt).
type StepEventObserver interface {
	StepEvent(ctx context.Context, ev *StepEvent)
}

// Step event types recorded by the engine and by observe.Transport.
const (
	StepEventProviderRequest  = "provider_request"  // Payload: *llm.Request
	StepEventProviderResponse = "provider_response" // Payload: *llm.Response (nil on error)
	StepEventToolInvocation   = "tool_invocation"   // Payload: *ToolInvocation
	StepEventHTTP             = "http"              // an HTTP exchange of a step
)

// StepRef identifies the step an event belongs to. Model calls and custom
// steps know the id their step will be committed with (StepID); a tool call
// is identified by its ToolCallID and becomes the tool step that carries it.
type StepRef struct {
	SessionID  string
	RunID      string
	StepID     string
	StepName   string
	ToolCallID string
	Attempt    int
}

// StepEvent is a fine-grained event inside a step, as recorded. Payload is
// any value that marshals to JSON; observers marshal it off the critical
// path, so it must not change after it was recorded.
type StepEvent struct {
	StepRef
	Type     string
	Name     string // model, tool or "METHOD host/path"
	Time     time.Time
	Duration time.Duration
	Payload  any
	Error    string
}

// ToolInvocation is the payload of a tool_invocation event.
type ToolInvocation struct {
	Arguments      json.RawMessage `json:"arguments,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Content        string          `json:"content,omitempty"`
	Output         json.RawMessage `json:"output,omitempty"`
	IsError        bool            `json:"is_error,omitempty"`
}

// MaskFunc rewrites a step before it is persisted, e.g. to mask personal
// data. It runs on the run's critical path, for every step, before the
// commit; the committed (masked) step is also what later model calls see.
// Identity fields (ids, sequence, kind, status) are restored after it runs.
type MaskFunc func(*Step)

// observerQueueSize is the buffer of each observer's queue.
const observerQueueSize = 4096

// observeState is the observation machinery of one engine.
type observeState struct {
	logger *slog.Logger
	mu     sync.RWMutex
	masks  []MaskFunc
	queues []*observerQueue
	events atomic.Int32 // queues whose observer wants step events
	any    atomic.Bool  // masks or queues registered
}

// observation returns e's state, creating it when create is set; nil when
// nothing was ever registered.
func (e *Engine) observation(create bool) *observeState {
	if create {
		e.obsOnce.Do(func() {
			st := &observeState{logger: e.cfg.Logger}
			// Committed steps come through the commit hook.
			e.OnCommit(func(s *Step) { e.observeStep(st, s) })
			e.obs.Store(st)
		})
	}
	return e.obs.Load()
}

// observing returns e's state when something is registered.
func (e *Engine) observing() *observeState {
	if st := e.observation(false); st != nil && st.any.Load() {
		return st
	}
	return nil
}

// Observe registers an observer and returns a function that unregisters it
// after delivering what is already queued.
func (e *Engine) Observe(o Observer) (stop func()) {
	st := e.observation(true)
	q := newObserverQueue(o, st.logger)
	st.mu.Lock()
	st.queues = append(st.queues, q)
	st.mu.Unlock()
	if q.ev != nil {
		st.events.Add(1)
	}
	st.any.Store(true)
	return func() {
		st.mu.Lock()
		for i, x := range st.queues {
			if x == q {
				st.queues = append(st.queues[:i:i], st.queues[i+1:]...)
				if q.ev != nil {
					st.events.Add(-1)
				}
				break
			}
		}
		st.mu.Unlock()
		q.Stop()
	}
}

// Mask registers a mask function, applied to every step before it is
// persisted, after the ones registered before it.
func (e *Engine) Mask(fn MaskFunc) {
	st := e.observation(true)
	st.mu.Lock()
	st.masks = append(st.masks, fn)
	st.mu.Unlock()
	st.any.Store(true)
}

// FlushObservers waits until every observer has handled what was queued
// before the call, or ctx ends.
func (e *Engine) FlushObservers(ctx context.Context) error {
	st := e.observation(false)
	if st == nil {
		return nil
	}
	st.mu.RLock()
	queues := append([]*observerQueue(nil), st.queues...)
	st.mu.RUnlock()
	for _, q := range queues {
		if err := q.Flush(ctx); err != nil {
			return err
		}
	}
	return nil
}

// stopObservers unregisters every observer after delivering what is queued.
func (e *Engine) stopObservers() {
	if st := e.observation(false); st != nil {
		st.stop()
	}
}

func (st *observeState) stop() {
	st.mu.Lock()
	queues := st.queues
	st.queues = nil
	st.mu.Unlock()
	st.events.Store(0)
	for _, q := range queues {
		q.Stop()
	}
}

func (st *observeState) each(fn func(q *observerQueue)) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	for _, q := range st.queues {
		fn(q)
	}
}

// maskSteps applies the mask functions to steps about to be committed. A
// panicking mask fails the commit: unmasked content is never persisted.
func (e *Engine) maskSteps(steps []*Step) (err error) {
	st := e.observing()
	if st == nil {
		return nil
	}
	st.mu.RLock()
	masks := st.masks
	st.mu.RUnlock()
	if len(masks) == 0 {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("stepwise: mask function panicked: %v", r)
		}
	}()
	for _, s := range steps {
		id := *s
		for _, fn := range masks {
			fn(s)
		}
		s.ID, s.SessionID, s.RunID, s.Sequence, s.ParentID = id.ID, id.SessionID, id.RunID, id.Sequence, id.ParentID
		s.Hop, s.Kind, s.Name, s.Status, s.CreatedAt = id.Hop, id.Kind, id.Name, id.Status, id.CreatedAt
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
func (e *Engine) observeStep(st *observeState, s *Step) {
	if !st.any.Load() {
		return
	}
	e.mu.Lock()
	x := e.active[s.RunID]
	e.mu.Unlock()
	r := &Run{ID: s.RunID, SessionID: s.SessionID}
	if x != nil {
		r = x.RunSnapshot()
	}
	st.each(func(q *observerQueue) { q.Send(obsItem{run: r, step: s}) })
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
	st.each(func(q *observerQueue) { q.Send(obsItem{run: &c}) })
}

// stepCtxKey carries the step a context executes, for RecordStepEvent.
type stepCtxKey struct{}

type stepCtx struct {
	ref StepRef
	st  *observeState
}

// StepRefFromContext returns the step ctx executes: set for the context of
// a custom step handler, a model call and a tool call while an observer
// that records step events is registered.
func StepRefFromContext(ctx context.Context) (StepRef, bool) {
	sc, ok := ctx.Value(stepCtxKey{}).(*stepCtx)
	if !ok {
		return StepRef{}, false
	}
	return sc.ref, true
}

// RecordStepEvent records ev as an event inside the step ctx executes (see
// StepRefFromContext), e.g. an API call a tool makes. Its StepRef is taken
// from ctx and Time defaults to now. It reports whether the event was
// recorded: false when ctx executes no step or no observer records events.
func RecordStepEvent(ctx context.Context, ev *StepEvent) bool {
	sc, ok := ctx.Value(stepCtxKey{}).(*stepCtx)
	if !ok || sc.st.events.Load() == 0 {
		return false
	}
	sc.st.record(sc.ref, ev)
	return true
}

func (st *observeState) record(ref StepRef, ev *StepEvent) {
	ev.StepRef = ref
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	st.each(func(q *observerQueue) {
		if q.ev != nil {
			q.Send(obsItem{ev: ev})
		}
	})
}

// StepContext returns ctx marked as executing the step ref, so that
// RecordStepEvent and observe.Transport attach events to it, for code that
// executes part of a step outside the engine's own calls. The events reach
// e's observers; they are kept for the step that commits with ref's StepID
// (or answers its ToolCallID). ctx is returned unchanged when no observer
// records step events.
func (e *Engine) StepContext(ctx context.Context, ref StepRef) context.Context {
	st := e.eventsState()
	if st == nil {
		return ctx
	}
	return context.WithValue(ctx, stepCtxKey{}, &stepCtx{st: st, ref: ref})
}

// eventsState returns e's state when an observer records step events.
func (e *Engine) eventsState() *observeState {
	if st := e.observing(); st != nil && st.events.Load() > 0 {
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
	return context.WithValue(ctx, stepCtxKey{}, &stepCtx{st: st, ref: StepRef{
		SessionID: x.Run.SessionID, RunID: x.Run.ID, StepID: s.step.ID, StepName: s.name, Attempt: s.step.Metrics.Attempt,
	}})
}

// observeModel wraps the model of an llm step so that its request and final
// response are recorded as events of step, and HTTP transports see the step
// in the call's context.
func (x *execution) observeModel(m llm.Model, step *Step) llm.Model {
	st := x.e.eventsState()
	if st == nil {
		return m
	}
	ref := StepRef{SessionID: x.Run.SessionID, RunID: x.Run.ID, StepID: step.ID, StepName: step.Name, Attempt: step.Metrics.Attempt}
	return &observedModel{Model: m, st: st, ref: ref}
}

type observedModel struct {
	llm.Model
	st  *observeState
	ref StepRef
}

func (m *observedModel) Generate(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Response, error] {
	return func(yield func(*llm.Response, error) bool) {
		ctx = context.WithValue(ctx, stepCtxKey{}, &stepCtx{st: m.st, ref: m.ref})
		start := time.Now()
		m.st.record(m.ref, &StepEvent{Type: StepEventProviderRequest, Name: m.Name(), Time: start.UTC(), Payload: req})
		var final *llm.Response
		var errText string
		for resp, err := range m.Model.Generate(ctx, req) {
			switch {
			case err != nil:
				errText = err.Error()
			case !resp.Partial:
				final = resp
			}
			if !yield(resp, err) {
				if errText == "" && final == nil {
					errText = "stopped by the consumer"
				}
				break
			}
		}
		ev := &StepEvent{Type: StepEventProviderResponse, Name: m.Name(), Time: start.UTC(), Duration: time.Since(start), Error: errText}
		if final != nil {
			ev.Payload = final
		}
		m.st.record(m.ref, ev)
	}
}

// observeTool wraps a tool so that each call is recorded as a
// tool_invocation event of its tool step.
func (x *execution) observeTool(t tool.Tool) tool.Tool {
	st := x.e.eventsState()
	if st == nil {
		return t
	}
	return &observedTool{Tool: t, st: st}
}

type observedTool struct {
	tool.Tool
	st *observeState
}

func (t *observedTool) Call(ctx context.Context, c *tool.Call) (res *tool.Result, err error) {
	ref := StepRef{SessionID: c.SessionID, RunID: c.RunID, StepName: StepTools, ToolCallID: c.ID, Attempt: c.Attempt}
	ctx = context.WithValue(ctx, stepCtxKey{}, &stepCtx{st: t.st, ref: ref})
	start := time.Now()
	inv := &ToolInvocation{Arguments: c.Arguments, IdempotencyKey: c.IdempotencyKey}
	ev := &StepEvent{Type: StepEventToolInvocation, Name: c.Name, Time: start.UTC(), Payload: inv}
	defer func() {
		ev.Duration = time.Since(start)
		if r := recover(); r != nil {
			ev.Error = fmt.Sprintf("panic: %v", r)
			t.st.record(ref, ev)
			panic(r)
		}
		if err != nil {
			ev.Error = err.Error()
		}
		if res != nil {
			inv.Content, inv.Output, inv.IsError = res.Content, res.Output, res.IsError
		}
		t.st.record(ref, ev)
	}()
	return t.Tool.Call(ctx, c)
}

// obsItem is one call queued for an observer.
type obsItem struct {
	run  *Run
	step *Step
	ev   *StepEvent
}

// observerQueue delivers the calls of one observer in order, on its own
// goroutine.
type observerQueue struct {
	*obsqueue.Queue[obsItem]
	ev StepEventObserver // nil when o records no step events
}

func newObserverQueue(o Observer, logger *slog.Logger) *observerQueue {
	q := &observerQueue{}
	q.ev, _ = o.(StepEventObserver)
	q.Queue = obsqueue.New(observerQueueSize, logger, o, func(ctx context.Context, it obsItem) {
		switch {
		case it.ev != nil:
			q.ev.StepEvent(ctx, it.ev)
		case it.step != nil:
			o.StepCommitted(ctx, it.run, it.step)
		default:
			o.RunFinished(ctx, it.run)
		}
	})
	return q
}
