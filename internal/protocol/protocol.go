// Package protocol projects a run's step log onto the client protocol's
// events (continuations, human-input requests, the result or error), so
// that every caller — live, late, reconnecting, in-process or over HTTP —
// sees the same events in the same order, each once.
package protocol

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/stepwise-run/stepwise/internal/broker"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// The client protocol is a projection of the run's step log, so that every
// caller — live, late, reconnecting, in-process or over HTTP — sees the same
// events in the same order, each once:
//
//   - each step the run committed, in sequence order, at position (SEQ, 0):
//     a *HumanInputRequest when it is an input step still waiting when the
//     caller reaches it (and the run can still take the answer), else a
//     *wire.Continuation describing the run at that step;
//   - then, once the run is finished, its *Result or *Error at (L, 1), L
//     being the sequence of the run's last step (0 when it has none).
//
// A position is the caller's cursor: NextStep returns the first event after
// it. Steps of other runs of the session (earlier turns, sub-agents) are not
// the run's events and are skipped, except the requests of its sub-agents'
// runs still waiting when reached: they are *HumanInputRequests of the run
// (ProvideHumanInput answers them through it).

// protoPage is how many steps a look for the run's next non-system step
// reads at a time.
const protoPage = 4

// Projector reads a run's events from the store, and waits for the next
// one on the broker.
type Projector struct {
	Store  store.Store
	Broker *broker.Broker
}

// Next implements the protocol's next-step call (see stepwise.Client.NextStep):
// it returns the first event of the run after inv's position, waiting for
// one if needed, and advances inv to it.
func (e *Projector) Next(ctx context.Context, inv *wire.Invocation) (wire.AgentStep, error) {
	pos := inv.After
	if inv.Cursor != "" {
		p, err := steptype.ParsePosition(inv.Cursor)
		if err != nil {
			return nil, fmt.Errorf("%w: invocation cursor: %v", store.ErrInvalid, err)
		}
		if pos.Less(p) {
			pos = p
		}
	}
	r, err := e.Store.RunGet(ctx, &store.RunGetParams{ID: inv.RunID})
	if err != nil {
		return nil, fmt.Errorf("run %q: %w", inv.RunID, err)
	}
	for {
		// Watch before reading: a change after the read wakes the wait.
		sub := e.Broker.Watch(r.SessionID, r.ID)
		step, at, err := e.protocolEvent(ctx, r.ID, pos)
		if err != nil || step != nil {
			e.Broker.Unsubscribe(r.SessionID, sub)
			if step != nil {
				inv.After, inv.Cursor = at, at.String()
			}
			return step, err
		}
		err = waitRunChange(ctx, sub)
		e.Broker.Unsubscribe(r.SessionID, sub)
		if err != nil {
			return nil, err
		}
	}
}

// protocolEvent returns the run's first protocol event after pos and its
// position, or nil when there is none yet.
func (e *Projector) protocolEvent(ctx context.Context, runID string, pos steptype.Position) (wire.AgentStep, steptype.Position, error) {
	// The run is read before its steps: a run finished at that read has
	// all its steps in the list.
	r, err := e.Store.RunGet(ctx, &store.RunGetParams{ID: runID})
	if err != nil {
		return nil, pos, fmt.Errorf("run %q: %w", runID, err)
	}
	steps, err := e.Store.StepList(ctx, &store.StepListParams{RunID: runID, StartSeq: pos.Seq + 1, Limit: 2})
	if err != nil {
		return nil, pos, fmt.Errorf("run %q steps: %w", runID, err)
	}
	if !r.Status.Terminal() {
		// A sub-agent's pending request is the run's event too: its
		// caller is the one who can answer it.
		if req, at, err := e.descendantRequest(ctx, r, pos, steps); req != nil || err != nil {
			return req, at, err
		}
	}
	if len(steps) > 0 {
		s := steps[0]
		at := steptype.Position{Seq: s.Sequence}
		if s.Kind == steptype.KindInput && s.Status == steptype.StepWaiting && !r.Status.Terminal() {
			req, err := inputRequestOf(s)
			return req, at, err
		}
		c, err := e.continuationAt(ctx, r, steps)
		return c, at, err
	}
	if !r.Status.Terminal() {
		return nil, pos, nil
	}
	last, err := e.Store.StepList(ctx, &store.StepListParams{RunID: runID, Desc: true, Limit: 1})
	if err != nil {
		return nil, pos, fmt.Errorf("run %q steps: %w", runID, err)
	}
	final := steptype.Position{Idx: 1}
	if len(last) > 0 {
		final.Seq = last[0].Sequence
	}
	if !pos.Less(final) {
		return nil, pos, fmt.Errorf("%w: run %s is %s and its %s was delivered at %s", wire.ErrRunFinished, r.ID, r.Status, finalName(r), final)
	}
	return finalStep(r), final, nil
}

func finalName(r *steptype.Run) string {
	if r.Status == steptype.RunCompleted {
		return "result"
	}
	return "error"
}

// continuationAt describes the run at steps[0], the first step after pos:
// its status then (waiting at an input step, which was answered since;
// running otherwise), the step it went to next (the name of its next
// non-system step, or its cursor when it has none yet) and the last
// progress reported up to it (carried by the step itself).
func (e *Projector) continuationAt(ctx context.Context, r *steptype.Run, steps []*steptype.Step) (*wire.Continuation, error) {
	s := steps[0]
	c := &wire.Continuation{Status: string(steptype.RunRunning), Step: s}
	if s.Kind == steptype.KindInput {
		c.Status = string(steptype.RunWaiting)
	}
	fillProgress(c)
	if c.CurrentStep = nextStepName(steps[1:]); c.CurrentStep != "" {
		return c, nil
	}
	// No named step after s yet: the run's cursor names the next step,
	// provided the run is read after s was committed and no step followed
	// before that read.
	cur, err := e.Store.RunGet(ctx, &store.RunGetParams{ID: r.ID})
	if err != nil {
		return nil, fmt.Errorf("run %q: %w", r.ID, err)
	}
	if c.CurrentStep, err = e.nextNamedStep(ctx, r.ID, s.Sequence); err != nil {
		return nil, err
	}
	if c.CurrentStep == "" {
		c.CurrentStep = cur.Cursor
	}
	return c, nil
}

// nextNamedStep returns the graph step of the run's first non-system step
// after seq, or "" when there is none.
func (e *Projector) nextNamedStep(ctx context.Context, runID string, seq int64) (string, error) {
	for {
		page, err := e.Store.StepList(ctx, &store.StepListParams{RunID: runID, StartSeq: seq + 1, Limit: protoPage})
		if err != nil {
			return "", fmt.Errorf("run %q steps: %w", runID, err)
		}
		if name := nextStepName(page); name != "" || len(page) < protoPage {
			return name, nil
		}
		seq = page[len(page)-1].Sequence
	}
}

// nextStepName is the graph step of the first non-system step.
func nextStepName(steps []*steptype.Step) string {
	for _, s := range steps {
		if s.Kind != steptype.KindSystem {
			return s.Name
		}
	}
	return ""
}

// descendantRequest returns the first input request of a sub-agent run of r
// (at any depth) still waiting after pos and before the run's own next
// step, or nil.
func (e *Projector) descendantRequest(ctx context.Context, r *steptype.Run, pos steptype.Position, own []*steptype.Step) (wire.AgentStep, steptype.Position, error) {
	pend, err := e.Store.StepList(ctx, &store.StepListParams{SessionID: r.SessionID, Status: steptype.StepWaiting,
		Kinds: []steptype.Kind{steptype.KindInput}, StartSeq: pos.Seq + 1})
	if err != nil {
		return nil, pos, fmt.Errorf("session %q requests: %w", r.SessionID, err)
	}
	for _, s := range pend {
		if len(own) > 0 && own[0].Sequence < s.Sequence {
			break
		}
		if s.Hop > r.Hop && e.Descends(ctx, s.RunID, r.ID) {
			req, err := inputRequestOf(s)
			return req, steptype.Position{Seq: s.Sequence}, err
		}
	}
	return nil, pos, nil
}

// Descends reports whether run id is a sub-agent run of ancestor, at any
// depth.
func (e *Projector) Descends(ctx context.Context, id, ancestor string) bool {
	for range 64 {
		r, err := e.Store.RunGet(ctx, &store.RunGetParams{ID: id})
		if err != nil || r.ParentRunID == "" {
			return false
		}
		if r.ParentRunID == ancestor {
			return true
		}
		id = r.ParentRunID
	}
	return false
}

// waitRunChange waits until the run may have a new event: a step of it was
// committed or resolved, it parked or finished, or the subscriber was told
// to re-read the store (another instance changed the session).
func waitRunChange(ctx context.Context, sub *broker.Subscriber) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sub.Lag():
			return nil
		case <-sub.Ready():
			for _, ev := range sub.Take(nil) {
				switch ev.Type {
				case steptype.EventStepCompleted, steptype.EventRunWaiting, steptype.EventRunFinished:
					return nil
				}
			}
		}
	}
}

// fillProgress sets c's progress from its step.
func fillProgress(c *wire.Continuation) {
	if c.Step != nil && c.Step.Progress != nil {
		c.Progress, c.ProgressMessage = c.Step.Progress.Fraction, c.Step.Progress.Message
	}
}

func inputRequestOf(s *steptype.Step) (*wire.HumanInputRequest, error) {
	var req wire.InputRequest
	if err := json.Unmarshal(s.Inputs, &req); err != nil {
		return nil, fmt.Errorf("input request %s: %w", s.ID, err)
	}
	return &wire.HumanInputRequest{RequestID: s.ID, Prompt: req.Prompt, Schema: req.Schema, Context: req.Context, Approval: req.Approval, ExpiresAt: req.ExpiresAt, Breakpoint: req.Breakpoint}, nil
}

// finalStep converts a finished run to a Result or an Error.
func finalStep(r *steptype.Run) wire.AgentStep {
	if r.Status == steptype.RunCompleted {
		return &wire.Result{Value: r.Output, Metadata: map[string]any{
			"run_id": r.ID, "session_id": r.SessionID, "steps": r.StepCount,
			"execution_time_ms": r.UpdatedAt.Sub(r.CreatedAt).Milliseconds(),
		}}
	}
	out := &wire.Error{Message: "run " + string(r.Status)}
	if r.Error != nil {
		out.Message, out.Cause, out.Recoverable = r.Error.Message, r.Error.Cause, r.Error.Recoverable
		out.RetryCount = max(0, r.Error.Attempt-1)
	}
	return out
}
