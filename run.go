package stepwise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/stepwise-run/stepwise/internal/answer"

	"github.com/stepwise-run/stepwise/internal/runexec"

	"github.com/stepwise-run/stepwise/internal/broker"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

// StartParams start a run.
type StartParams struct {
	// Agent is the registered agent name. Required.
	Agent string
	// SessionID continues an existing session (multi-turn); empty starts a
	// new session.
	SessionID string
	// Input is the user message of the turn.
	Input string
	// State is the initial custom state (a JSON object or a value that
	// marshals to one); merged into the session's previous state is not
	// implied: each run starts from State.
	State any
	// Replay, when set, reuses recorded outputs of another session.
	Replay *ReplayOptions
	// Title names a new session; without one it is named after Input
	// (TitleOf).
	Title string
	// ClientTools are tools the caller executes (a front end's tools):
	// offered to the model with the agent's; a call to one parks the run as
	// an input step answered with the tool's result (see ClientToolCall).
	ClientTools []llm.ToolDef
	// Continue runs the agent on the session as it stands, without a new
	// user message: the run starts at the agent's start step (e.g. on a
	// fork whose last step is an edited message, "run from here").
	// SessionID is required and Input must be empty.
	Continue bool
	// Metadata is the free-form metadata of a new session (ignored when
	// SessionID continues one); analytics split by its keys (GET
	// /v1/metrics?split=KEY).
	Metadata map[string]any
	// Breakpoints pause the run before or after the steps they select, in
	// addition to the agent's (see Breakpoints).
	Breakpoints *Breakpoints
}

// StartRun creates a queued run (and a session when SessionID is empty) and
// returns it without executing it. Execute it with Execute, or let the
// background executor (Start) pick it up.
func (e *Engine) StartRun(ctx context.Context, p StartParams) (*Run, error) {
	return e.startRun(ctx, p, false)
}

// startRun creates a run; with own set it is created running and leased by
// this engine, so that no executor (here or elsewhere) takes it before the
// caller executes it.
func (e *Engine) startRun(ctx context.Context, p StartParams, own bool) (*Run, error) {
	a, err := e.Agent(p.Agent)
	if err != nil {
		return nil, err
	}
	if p.Continue && (p.SessionID == "" || p.Input != "") {
		return nil, fmt.Errorf("%w: a continued run needs a session and no input", store.ErrInvalid)
	}
	if p.Input, err = e.maskInput(p.Input); err != nil {
		return nil, err
	}
	if err := checkClientTools(a, p.ClientTools); err != nil {
		return nil, err
	}
	if err := answer.CheckSelectors(p.Breakpoints); err != nil {
		return nil, fmt.Errorf("%w: %w", store.ErrInvalid, err)
	}
	now := e.now()
	sid := p.SessionID
	var newSession *store.SessionCreateParams // created with the run, in its transaction
	if sid == "" {
		sid = NewID()
		var meta json.RawMessage
		if len(p.Metadata) > 0 {
			if meta, err = json.Marshal(p.Metadata); err != nil {
				return nil, fmt.Errorf("%w: session metadata: %v", store.ErrInvalid, err)
			}
		}
		title := p.Title
		if title == "" {
			title = TitleOf(p.Input) // named after its first message, as forks are
		}
		newSession = &store.SessionCreateParams{ID: sid, Agent: a.Name, Title: title, Metadata: meta, Now: now}
	} else if _, err := e.store.SessionGet(ctx, &store.SessionGetParams{ID: sid}); err != nil {
		return nil, fmt.Errorf("session %q: %w", sid, err)
	}
	r := &Run{ID: NewID(), SessionID: sid, Agent: a.Name, Status: steptype.RunQueued, Input: p.Input, CreatedAt: now}
	if p.Continue {
		r.Cursor = a.StartStep
	}
	if p.State != nil {
		st, err := toRaw(p.State)
		if err != nil {
			return nil, fmt.Errorf("initial state: %w", err)
		}
		r.State = st
	}
	if p.Replay != nil {
		if _, err := e.store.SessionGet(ctx, &store.SessionGetParams{ID: p.Replay.SourceSessionID}); err != nil {
			return nil, fmt.Errorf("replay source %q: %w", p.Replay.SourceSessionID, err)
		}
	}
	if p.Replay != nil || len(p.ClientTools) > 0 || p.Breakpoints != nil {
		r.Options, _ = json.Marshal(runOptions{Replay: p.Replay, ClientTools: p.ClientTools, Breakpoints: p.Breakpoints})
	}
	r.Options = withVersion(r.Options, a.Version)
	cp := &store.RunCreateParams{Run: r, Session: newSession}
	if own {
		r.Status, r.LeaseOwner = steptype.RunRunning, e.cfg.Owner
		cp.LeaseFor = e.cfg.Lease // from the database's clock
	}
	leaseAt := time.Now()
	created, err := e.store.RunCreate(ctx, cp)
	if errors.Is(err, store.ErrSessionBusy) {
		// The store enforces one unfinished top-level run per session.
		return nil, fmt.Errorf("%w: %s", err, e.busyDetail(ctx, sid))
	}
	if err != nil {
		return nil, fmt.Errorf("create run: %w", err)
	}
	if own {
		e.exec.Leases.Set(created.ID, leaseAt)
	}
	if !own {
		e.wake()
	}
	return created, nil
}

// Run starts a run and executes it in the caller's iteration; see Execute.
func (e *Engine) Run(ctx context.Context, p StartParams) iter.Seq2[*Event, error] {
	return func(yield func(*Event, error) bool) {
		r, err := e.startRun(ctx, p, true)
		if err != nil {
			yield(nil, err)
			return
		}
		for ev, err := range e.execute(ctx, r.ID, true) {
			if !yield(ev, err) {
				return
			}
		}
	}
}

// Execute claims a run and executes it until it finishes or parks waiting
// for input, yielding its events (sub-agent runs included).
//
// Contract: each pair is an event or an error; an error ends the sequence
// and is an engine failure (run not found, claimed elsewhere, store error) —
// a run that fails is reported by its run_finished event, not an error.
// Cancelling ctx stops the execution at once: nothing of the step in
// flight is committed (its calls re-run on resume), the run is handed back
// to the queue, and the sequence ends with the context's cause. Breaking
// out of the loop does the same, without the error. The execution starts
// when iteration begins; an event reaches the consumer within 1 ms.
func (e *Engine) Execute(ctx context.Context, runID string) iter.Seq2[*Event, error] {
	return e.execute(ctx, runID, false)
}

// execute is Execute; owned says the caller created the run already leased
// to this engine (Run), so it must not be claimed again.
func (e *Engine) execute(ctx context.Context, runID string, owned bool) iter.Seq2[*Event, error] {
	return func(yield func(*Event, error) bool) {
		x, err := e.claim(ctx, runID, nil, owned)
		if err != nil {
			yield(nil, err)
			return
		}
		events := broker.NewSink()
		x.Sink = events
		done := make(chan error, 1)
		go func() {
			err := x.loop()
			x.release()
			events.Close()
			done <- err
		}()
		for batch := events.Next(nil); batch != nil; batch = events.Next(batch) {
			for _, ev := range batch {
				events.Took()
				if !yield(ev, nil) {
					x.Cancel(runexec.ErrDetached)
					for batch = events.Next(batch); batch != nil; batch = events.Next(batch) {
					}
					<-done
					return
				}
			}
		}
		if err := <-done; err != nil {
			yield(nil, err)
		}
	}
}

// Resume executes a run from its cursor; see Execute.
func (e *Engine) Resume(ctx context.Context, runID string) iter.Seq2[*Event, error] {
	return e.Execute(ctx, runID)
}

// Wait runs an event sequence to its end and returns the run's final row.
func (e *Engine) Wait(ctx context.Context, seq iter.Seq2[*Event, error]) (*Run, error) {
	var last *Run
	for ev, err := range seq {
		if err != nil {
			return nil, err
		}
		if ev.Run != nil && ev.RunID == ev.Run.ID && ev.Run.Hop == 0 {
			last = ev.Run
		}
	}
	if last == nil {
		return nil, errors.New("stepwise: run produced no events")
	}
	return e.store.RunGet(ctx, &store.RunGetParams{ID: last.ID})
}

// Cancel cancels a run that has not finished: its status becomes cancelled
// and, if it is executing in this process, its execution stops at once.
func (e *Engine) Cancel(ctx context.Context, runID, reason string) (*Run, error) {
	cancelled := steptype.RunCancelled
	if reason == "" {
		reason = "cancelled"
	}
	r, err := e.store.RunUpdate(ctx, &store.RunUpdateParams{
		ID: runID, ExpectStatus: []steptype.RunStatus{steptype.RunQueued, steptype.RunRunning, steptype.RunWaiting},
		Status: &cancelled, ClearLease: true, Error: &StepError{Message: reason, Class: steptype.ErrorPermanent, Code: "cancelled"}, Now: e.now(),
	})
	if errors.Is(err, store.ErrConflict) {
		return nil, fmt.Errorf("%w: run %s", ErrRunFinished, runID)
	}
	if err != nil {
		return nil, fmt.Errorf("cancel run %q: %w", runID, err)
	}
	e.mu.Lock()
	x := e.active[runID]
	e.mu.Unlock()
	if x != nil {
		x.Cancel(ErrRunCancelled)
	}
	e.broker.Publish(&Event{Type: EventRunFinished, SessionID: r.SessionID, RunID: r.ID, Run: r, Time: e.now()})
	e.observeRunFinished(r, nil)
	return r, nil
}

// busyDetail names the unfinished run that keeps a session busy.
func (e *Engine) busyDetail(ctx context.Context, sessionID string) string {
	runs, err := e.store.RunList(ctx, &store.RunListParams{SessionID: sessionID, Statuses: []steptype.RunStatus{steptype.RunQueued, steptype.RunRunning, steptype.RunWaiting}})
	for _, r := range runs {
		if err == nil && r.Hop == 0 {
			return fmt.Sprintf("run %s is %s", r.ID, r.Status)
		}
	}
	return "another run was started first"
}
