package runexec

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/stepwise-run/stepwise/internal/attach"
	"github.com/stepwise-run/stepwise/internal/convo"
	"github.com/stepwise-run/stepwise/internal/stepres"
	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/tool"
)

// ErrStepPanic: a step's handler or a tool panicked (package stepwise
// exports it).
var ErrStepPanic = errors.New("stepwise: step panicked")

// errSiblingFailed cancels the calls of a tools step once the commit of
// one of them failed.
var errSiblingFailed = errors.New("stepwise: a sibling tool call's commit failed")

// StepTools is the name of the built-in tools step.
const StepTools = "tools"

// Retry is a retry policy: at most MaxAttempts attempts, waiting an
// exponential backoff with jitter between them (see Backoff).
type Retry struct {
	MaxAttempts int
	Initial     time.Duration
	Max         time.Duration
	Multiplier  float64
}

// Backoff is the wait before attempt+1: exponential with jitter, and at
// least retryAfter (a provider's Retry-After).
func (p Retry) Backoff(attempt int, retryAfter time.Duration) time.Duration {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     p.Initial,
		RandomizationFactor: 0.5,
		Multiplier:          p.Multiplier,
		MaxInterval:         p.Max,
	}
	b.Reset()
	var d time.Duration
	for i := 0; i < attempt; i++ {
		d = b.NextBackOff()
	}
	if retryAfter > d {
		d = retryAfter
	}
	return d
}

// Sleep waits d, or until ctx is done.
func Sleep(ctx context.Context, d time.Duration) error {
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

// Outcome is what a tool call hands to the tools step's goroutine for
// commit.
type Outcome struct {
	Step  *steptype.Step
	Final bool   // the call is done (Step is its result)
	Park  bool   // the call needs a human: Step is a waiting input step
	Child string // a child run that parked waiting for input
	// Completed is the zero event allocated with Step (ExecTool), for its
	// step_completed event; nil: a new one.
	Completed *steptype.Event
}

// ToolExec is one call of a tool by ExecTool.
type ToolExec struct {
	Tool    tool.Tool
	Call    steptype.ToolCall
	IdemKey string
	Answers []json.RawMessage // answers to the input the call asked for
	Retry   Retry
	Measure bool // record what each attempt costs the machine
	Replay  bool // the run is a replay: the result is marked live
}

// ExecTool runs a call of a tool with retries, sending an error step for
// each failed attempt and finally the result step. It returns the tool's
// request for input instead when the tool needs it, and sends nothing
// when the execution was stopped while the call was in flight and the
// call failed (the call re-runs on resume); a call that returned its
// result sends it even then.
func (c *Core) ExecTool(ctx context.Context, p *ToolExec, send func(*Outcome)) *tool.InputNeeded {
	call := p.Call
	fp := convo.ToolFingerprint(call.Name, call.Arguments)
	for attempt := 1; ; attempt++ {
		start := c.Env.Now()
		var mark stepres.Mark
		if p.Measure {
			mark = stepres.Start()
		}
		res, err := CallTool(ctx, p.Tool, &tool.Call{
			ID: call.ID, Name: call.Name, Arguments: call.Arguments, IdempotencyKey: p.IdemKey,
			SessionID: c.Run.SessionID, RunID: c.Run.ID, Attempt: attempt, Answers: p.Answers,
		})
		use := mark.End()
		if c.Interrupted() && err != nil {
			// Cut by the stop (its context's error, most likely): the call
			// re-runs on resume. A result in hand commits all the same
			// (fenced by the lease): its side effect happened, and a
			// stop must not make it happen twice.
			return nil
		}
		if need, ok := errors.AsType[*tool.InputNeeded](err); ok {
			return need
		}
		if err == nil || llm.Classify(err) != steptype.ErrorTransient || attempt >= p.Retry.MaxAttempts || ctx.Err() != nil {
			send(c.toolOutcome(call, res, err, start, attempt, fp, use, p.Replay))
			return nil
		}
		es := &steptype.Step{Kind: steptype.KindError, Name: StepTools, Status: steptype.StepFailed, ToolName: call.Name,
			Error: &steptype.StepError{Message: err.Error(), Class: steptype.ErrorTransient, Attempt: attempt, Recoverable: true, Code: "tool_error"}}
		es.Metrics.StartedAt, es.Metrics.FinishedAt, es.Metrics.Attempt = start, c.Env.Now(), attempt
		SetUsage(&es.Metrics, use)
		es.Inputs, _ = json.Marshal(map[string]any{"tool_call_id": call.ID})
		send(&Outcome{Step: es})
		if Sleep(ctx, p.Retry.Backoff(attempt, llm.RetryAfter(err))) != nil {
			return nil
		}
	}
}

// toolOutcome is the final outcome of a call: its result, or its error.
func (c *Core) toolOutcome(call steptype.ToolCall, res *tool.Result, err error, start time.Time, attempt int, fp string, use stepres.Usage, replay bool) *Outcome {
	if err != nil {
		res = &tool.Result{Content: "error: " + err.Error(), IsError: true}
	}
	tr := new(toolResult)
	s := &tr.s
	c.FillToolResult(s, call, res)
	s.Metrics.StartedAt, s.Metrics.Attempt, s.Fingerprint = start, attempt, fp
	SetUsage(&s.Metrics, use)
	if replay {
		s.Replay = "live"
	}
	if err != nil {
		s.Error = &steptype.StepError{Message: err.Error(), Class: llm.Classify(err), Attempt: attempt, Code: "tool_error"}
	}
	tr.o = Outcome{Step: s, Final: true, Completed: &tr.ev}
	return &tr.o
}

// toolResult is a call's tool step, its outcome and the step's
// step_completed event in one allocation (toolOutcome).
type toolResult struct {
	o  Outcome
	s  steptype.Step
	ev steptype.Event
}

// CallTool calls a tool, turning a panic into an error.
func CallTool(ctx context.Context, t tool.Tool, c *tool.Call) (res *tool.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("%w: tool %q: %v", ErrStepPanic, c.Name, r)
		}
	}()
	res, err = t.Call(ctx, c)
	if err == nil && res == nil {
		res = &tool.Result{}
	}
	return res, err
}

// ToolResultStep builds the tool step of a call.
func (c *Core) ToolResultStep(call steptype.ToolCall, r *tool.Result) *steptype.Step {
	s := new(steptype.Step)
	c.FillToolResult(s, call, r)
	return s
}

// FillToolResult makes the zero step s the tool step of a call, its
// attachments staged. (Field by field: assigning a whole Step to *s
// copies all of it, write barriers included.)
func (c *Core) FillToolResult(s *steptype.Step, call steptype.ToolCall, r *tool.Result) {
	content := r.Content
	if content == "" && len(r.Output) > 0 {
		content = string(r.Output)
	}
	s.Kind, s.Name, s.Role = steptype.KindTool, StepTools, steptype.RoleTool
	s.Content, s.ToolCallID, s.ToolName = content, call.ID, call.Name
	s.Inputs, s.Outputs, s.StatePatch = call.Arguments, r.Output, r.State
	if r.IsError {
		s.Error = &steptype.StepError{Message: content, Class: steptype.ErrorPermanent, Code: "tool_error"}
	}
	if len(r.Metadata) > 0 {
		s.Metadata = r.Metadata
	}
	s.Metrics.StartedAt = c.Env.Now()
	s.Metrics.FinishedAt = s.Metrics.StartedAt
	attach.Stage(c.Env.Store, c.Env.Now, s, r.Attachments)
}

// SetUsage records on m what its step used while it ran (see
// steptype.Metrics.CPUTime).
func SetUsage(m *steptype.Metrics, u stepres.Usage) {
	m.CPUTime, m.AllocBytes, m.AllocObjects, m.OverlappingSteps = u.CPU, u.AllocBytes, u.AllocObjects, u.Overlapping
}

// ExecParallel executes calls in parallel, at most limit at once, handing
// each outcome to handle on this goroutine. A failed commit (handle
// returns false) cancels the sibling calls: their results could not be
// committed anyway (the step re-runs them).
func ExecParallel(ctx context.Context, calls []steptype.ToolCall, limit int, exec func(context.Context, steptype.ToolCall, func(*Outcome)), handle func(*Outcome) bool) {
	ctx, cancelCalls := context.WithCancelCause(ctx)
	defer cancelCalls(nil)
	results := make(chan *Outcome)
	// The loop below reads every outcome until the calls are done (it
	// drains after a failed commit), so a send never blocks for long: an
	// outcome sent after the execution was stopped still reaches handle,
	// whose fenced commit lands or fails.
	send := func(o *Outcome) { results <- o }
	var wg sync.WaitGroup
	sem := make(chan struct{}, limit)
	for _, call := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			exec(ctx, call, send)
		}()
	}
	go func() { wg.Wait(); close(results) }()
	for o := range results {
		if !handle(o) {
			cancelCalls(errSiblingFailed)
		}
	}
}

// IdemSeed is what a tools step's idempotency keys derive from: the run and
// the sequence of the assistant message whose calls it executes.
type IdemSeed struct {
	RunID string
	Seq   int64
	Set   bool
}

// Key is the idempotency key of call id: the hex of the first 16 bytes of
// sha256("<run id>:<sequence>:<call id>"), or of sha256(":<call id>")
// without an assistant message.
func (b IdemSeed) Key(callID string) string {
	var kb [128]byte
	k := kb[:0]
	if b.Set {
		k = strconv.AppendInt(append(append(k, b.RunID...), ':'), b.Seq, 10)
	}
	k = append(append(k, ':'), callID...)
	return convo.Hex16(sha256.Sum256(k))
}
