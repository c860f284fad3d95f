package stepwise

import (
	"context"
	"encoding/json"

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

// NextStep implements the protocol's next-step call over the engine (see
// Client.NextStep): it returns the first event of the run after inv's
// position, waiting for one if needed, and advances inv to it. The HTTP
// server's long-poll uses it with a deadline. The events are a projection
// of the run's step log (package internal/protocol): each step the run
// committed, in sequence order, at position (SEQ, 0) — a
// *HumanInputRequest when it is an input step still waiting when the
// caller reaches it, else a *Continuation — then, once the run is
// finished, its *Result or *Error at (L, 1), L being the sequence of the
// run's last step. Requests of its sub-agents' runs still waiting when
// reached are the run's events too.
func (e *Engine) NextStep(ctx context.Context, inv *Invocation) (AgentStep, error) {
	return e.proto.Next(ctx, inv)
}
