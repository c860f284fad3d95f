package stepwise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/stepwise-run/stepwise/internal/runexec"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/tool"
)

// subAgentDef is how a sub-agent is offered to its parent's model.
func subAgentDef(a *Agent) llm.ToolDef {
	desc := a.Description
	if desc == "" {
		desc = "Delegate a task to the " + a.Name + " agent."
	}
	return llm.ToolDef{
		Name: a.Name, Description: desc,
		Parameters: json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"The task or question for the agent"}},"required":["input"],"additionalProperties":false}`),
	}
}

// callSubAgent runs (or resumes) the child run of one sub-agent call in this
// process and returns the parent's agent step. A failed child becomes a tool
// error for the parent; a child waiting for input parks the parent.
func (x *execution) callSubAgent(ctx context.Context, sub *Agent, call ToolCall) *runexec.Outcome {
	var args struct {
		Input string `json:"input"`
	}
	if err := json.Unmarshal(call.Arguments, &args); err != nil || args.Input == "" {
		return x.agentResult(call, "", &tool.Result{Content: `error: sub-agent calls need {"input": "..."}`, IsError: true})
	}
	// The tightest max_depth of the call chain applies: the root agent's
	// bounds every nested sub-agent, whatever their own limits.
	limit, setBy := x.agent.Limits.MaxDepth, x.agent.Name
	for p := x.parent; p != nil; p = p.parent {
		if p.agent.Limits.MaxDepth < limit {
			limit, setBy = p.agent.Limits.MaxDepth, p.agent.Name
		}
	}
	if x.Run.Hop+1 > limit {
		return x.agentResult(call, "", toolError(fmt.Sprintf("sub-agent depth limit %d (of agent %s) reached", limit, setBy)))
	}
	for p := x; p != nil; p = p.parent {
		if p.agent.Name == sub.Name {
			return x.agentResult(call, "", toolError(fmt.Sprintf("sub-agent cycle: %q is already running in this call chain", sub.Name)))
		}
	}
	child, created, err := x.childRun(ctx, sub, call, args.Input)
	if err != nil && x.Interrupted() {
		return nil
	}
	if err != nil {
		return x.agentResult(call, "", toolError("sub-agent: "+err.Error()))
	}
	if !child.Status.Terminal() {
		cx, err := x.e.claim(ctx, child.ID, x, created)
		if err != nil && x.Interrupted() {
			return nil
		}
		if errors.Is(err, ErrConflict) {
			// Another execution holds the child (it was handed back to the
			// queue and taken by an executor): wait for it, as for a child
			// waiting for input; its end wakes this run.
			return &runexec.Outcome{Child: child.ID}
		}
		if errors.Is(err, ErrRunFinished) {
			// Another execution finished the child between the read and
			// the claim: its end is the call's result, not a failure.
			if child, err = x.e.store.RunGet(ctx, &store.RunGetParams{ID: child.ID}); err != nil {
				if x.Interrupted() {
					return nil
				}
				return x.childResult(call, child, toolError("sub-agent: "+err.Error()))
			}
			return x.childOutcome(sub, call, child)
		}
		if err != nil {
			return x.childResult(call, child, toolError("sub-agent: "+err.Error()))
		}
		err = cx.loop()
		cx.release()
		if x.Interrupted() {
			// The parent was stopped: the child handed itself back to the
			// queue and the parent commits nothing for this call.
			return nil
		}
		if err != nil {
			return x.childResult(call, child, toolError("sub-agent: "+err.Error()))
		}
		child = cx.RunSnapshot()
	}
	return x.childOutcome(sub, call, child)
}

// childOutcome is the parent's outcome of a child run that stopped.
func (x *execution) childOutcome(sub *Agent, call ToolCall, child *Run) *runexec.Outcome {
	switch child.Status {
	case steptype.RunCompleted:
		return x.childResult(call, child, &tool.Result{Content: child.Output})
	case steptype.RunWaiting:
		return &runexec.Outcome{Child: child.ID}
	default:
		msg := "sub-agent " + sub.Name + " " + string(child.Status)
		if child.Error != nil {
			msg += ": " + child.Error.Message
		}
		return x.childResult(call, child, toolError(msg))
	}
}

// childRun finds the child run of a call (after a crash or a stop) or
// creates it; created says it did.
func (x *execution) childRun(ctx context.Context, sub *Agent, call ToolCall, input string) (*Run, bool, error) {
	kids, err := x.e.store.RunList(ctx, &store.RunListParams{ParentRunID: x.Run.ID})
	if err != nil {
		return nil, false, err
	}
	for _, k := range kids {
		var o runOptions
		_ = json.Unmarshal(k.Options, &o)
		if o.ToolCallID == call.ID {
			return k, false, nil
		}
	}
	o := runOptions{ToolCallID: call.ID, AgentVersion: sub.Version}
	if x.replay != nil {
		o.Replay = &x.replay.Opts
	}
	opts, _ := json.Marshal(o)
	// Created leased to this engine, so that no executor takes it before
	// this execution runs it.
	now := x.e.now()
	r := &Run{
		ID: NewID(), SessionID: x.Run.SessionID, Agent: sub.Name, ParentRunID: x.Run.ID, ParentStepID: NewID(),
		Hop: x.Run.Hop + 1, Status: steptype.RunRunning, Input: input, Options: opts, CreatedAt: now, UpdatedAt: now,
		LeaseOwner: x.e.cfg.Owner, LeaseExpires: now.Add(x.e.cfg.Lease),
	}
	created, err := x.e.store.RunCreate(ctx, &store.RunCreateParams{Run: r})
	return created, err == nil, err
}

// agentResult builds the parent's agent step for a sub-agent call; stepID
// is the id its child run links to. The step started when the call did.
func (x *execution) agentResult(call ToolCall, stepID string, r *tool.Result) *runexec.Outcome {
	s := x.ToolResultStep(call, r)
	s.Kind = steptype.KindAgent
	s.ID = stepID
	return &runexec.Outcome{Step: s, Final: true}
}

// childResult is agentResult for a call that has a child run: the step
// started when the child run did.
func (x *execution) childResult(call ToolCall, child *Run, r *tool.Result) *runexec.Outcome {
	o := x.agentResult(call, child.ParentStepID, r)
	if !child.CreatedAt.IsZero() && child.CreatedAt.Before(o.Step.Metrics.FinishedAt) {
		o.Step.Metrics.StartedAt = child.CreatedAt
	}
	return o
}

func toolError(msg string) *tool.Result {
	return &tool.Result{Content: "error: " + msg, IsError: true}
}
