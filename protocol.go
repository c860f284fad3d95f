package stepwise

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/wire"
)

// Client is the step-by-step client protocol: initiate a run, pull its next
// step — a continuation, a human-input request, a result or an error — and
// provide human input. The in-process client (Engine.Client) and the HTTP
// client (package client) both implement it.
type Client interface {
	// Initiate starts a run of agent with input and returns its invocation.
	Initiate(ctx context.Context, agent, input string, opts ...InitiateOption) (*Invocation, error)
	// NextStep blocks until the run has an event after the caller's
	// position (inv) and returns it, advancing inv: a *Continuation for
	// each step the run committed, a *HumanInputRequest for an input step
	// still pending when it is reached, then one *Result (completed) or
	// *Error (failed, cancelled). Every event comes once, in step order;
	// after the final one NextStep returns ErrRunFinished.
	NextStep(ctx context.Context, inv *Invocation) (AgentStep, error)
	// ProvideHumanInput answers a pending request of the run.
	ProvideHumanInput(ctx context.Context, inv *Invocation, requestID string, response json.RawMessage) error
}

// InitiateOption adjusts Initiate: it sets fields of the request that
// starts the run.
type InitiateOption = wire.InitiateOption

// InSession continues an existing session (multi-turn).
func InSession(id string) InitiateOption { return wire.InSession(id) }

// WithMetadata sets the metadata of the new session the run starts.
func WithMetadata(m map[string]any) InitiateOption { return wire.WithMetadata(m) }

// WithBreakpoints pauses the run before or after the steps b selects.
func WithBreakpoints(b *Breakpoints) InitiateOption { return wire.WithBreakpoints(b) }

// Invocation identifies a run being driven step by step and remembers how far
// the caller has read.
type Invocation = wire.Invocation

// AgentStep is one of *Continuation, *HumanInputRequest, *Result, *Error.
type AgentStep = wire.AgentStep

// Continuation reports one step the run committed, describing the run at
// that step; see wire.Continuation.
type Continuation = wire.Continuation

// HumanInputRequest asks the caller for input.
type HumanInputRequest = wire.HumanInputRequest

// Result is the final output of a completed run.
type Result = wire.Result

// Error reports a failed or cancelled run; it is an error.
type Error = wire.Error

// fillProgress sets c's progress from its step.
func fillProgress(c *Continuation) {
	if c.Step != nil && c.Step.Progress != nil {
		c.Progress, c.ProgressMessage = c.Step.Progress.Fraction, c.Step.Progress.Message
	}
}

// Client returns the in-process client of the engine. Runs are executed by
// the engine's background executor, which Client starts if needed.
func (e *Engine) Client() Client { return &localClient{e: e} }

type localClient struct{ e *Engine }

func (c *localClient) Initiate(ctx context.Context, agent, input string, opts ...InitiateOption) (*Invocation, error) {
	req := wire.InitiateRequest{Agent: agent, Input: input}
	for _, o := range opts {
		o(&req)
	}
	p := StartParams{Agent: req.Agent, Input: req.Input, SessionID: req.SessionID, Title: req.Title, Continue: req.Continue, Metadata: req.Metadata, Breakpoints: req.Breakpoints}
	if len(req.State) > 0 {
		p.State = req.State
	}
	if err := c.e.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	r, err := c.e.StartRun(ctx, p)
	if err != nil {
		return nil, err
	}
	return &Invocation{RunID: r.ID, SessionID: r.SessionID, Cursor: Position{}.String()}, nil
}

func (c *localClient) NextStep(ctx context.Context, inv *Invocation) (AgentStep, error) {
	return c.e.NextStep(ctx, inv)
}

func (c *localClient) ProvideHumanInput(ctx context.Context, inv *Invocation, requestID string, response json.RawMessage) error {
	_, err := c.e.Answer(ctx, AnswerParams{RunID: inv.RunID, RequestID: requestID, Answer: response})
	return err
}

func inputRequestOf(s *Step) (*HumanInputRequest, error) {
	var req InputRequest
	if err := json.Unmarshal(s.Inputs, &req); err != nil {
		return nil, fmt.Errorf("input request %s: %w", s.ID, err)
	}
	return &HumanInputRequest{RequestID: s.ID, Prompt: req.Prompt, Schema: req.Schema, Context: req.Context, Approval: req.Approval, ExpiresAt: req.ExpiresAt, Breakpoint: req.Breakpoint}, nil
}

// finalStep converts a finished run to a Result or an Error.
func finalStep(r *Run) AgentStep {
	if r.Status == steptype.RunCompleted {
		return &Result{Value: r.Output, Metadata: map[string]any{
			"run_id": r.ID, "session_id": r.SessionID, "steps": r.StepCount,
			"execution_time_ms": r.UpdatedAt.Sub(r.CreatedAt).Milliseconds(),
		}}
	}
	out := &Error{Message: "run " + string(r.Status)}
	if r.Error != nil {
		out.Message, out.Cause, out.Recoverable = r.Error.Message, r.Error.Cause, r.Error.Recoverable
		out.RetryCount = max(0, r.Error.Attempt-1)
	}
	return out
}

// NextStepAsync calls c.NextStep in a goroutine and delivers the outcome to
// fn, for callers that wait on a channel rather than a call. The returned
// channel closes after fn returns.
func NextStepAsync(ctx context.Context, c Client, inv *Invocation, fn func(AgentStep, error)) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(c.NextStep(ctx, inv))
	}()
	return done
}
