package stepwise

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
	"github.com/stepwise-run/stepwise/wire"
)

// ReplayParams replay a session with recorded outputs.
type ReplayParams = wire.ReplayParams

// Replay runs an agent again over a recorded session, into a new session
// that forks the recorded one at its first user message. Every user turn of
// the recorded session is replayed in order; a model response is reused
// whenever the new request is identical to a recorded one (canonical
// fingerprint of messages, tools and parameters), a tool result whenever
// name and arguments are identical; from the first divergence on, calls are
// live. Each replayed step records Replay = "reused" or "live".
//
// Replay returns the first run, queued; the next turn's run is queued when
// one finishes. Execute them (ReplayAll does) or let the background
// executor take them.
func (e *Engine) Replay(ctx context.Context, p ReplayParams) (*Run, error) {
	src, err := e.store.SessionGet(ctx, &store.SessionGetParams{ID: p.SessionID})
	if err != nil {
		return nil, fmt.Errorf("session %q: %w", p.SessionID, err)
	}
	name := p.Agent
	if name == "" {
		name = src.Agent
	}
	a, err := e.Agent(name)
	if err != nil {
		return nil, err
	}
	steps, err := e.store.StepList(ctx, &store.StepListParams{SessionID: src.ID, Kinds: []steptype.Kind{steptype.KindUser, steptype.KindLLM, steptype.KindTool}})
	if err != nil {
		return nil, err
	}
	var first *Step
	var turns []string
	for _, s := range steps {
		if s.Hop != 0 {
			continue
		}
		if s.Kind == steptype.KindUser {
			if first == nil {
				first = s
			} else {
				turns = append(turns, s.Content)
			}
		}
		if s.Kind == steptype.KindTool && !p.AllToolsLive && !containsStr(p.LiveTools, s.ToolName) && a.toolByName(s.ToolName) == nil && a.subAgentByName(s.ToolName) == nil && s.ToolName != AskHumanTool {
			return nil, fmt.Errorf("%w: agent %q has no tool %q, which the recorded session used", store.ErrInvalid, a.Name, s.ToolName)
		}
	}
	if first == nil {
		return nil, fmt.Errorf("%w: session %s has no user message to replay", store.ErrInvalid, src.ID)
	}
	fork, err := e.store.SessionFork(ctx, &store.SessionForkParams{ID: NewID(), ParentID: src.ID, Sequence: first.Sequence, Title: e.derivedTitle(ctx, "", "replay", src, ""), Now: e.now()})
	if err != nil {
		return nil, fmt.Errorf("fork: %w", err)
	}
	opts, _ := json.Marshal(runOptions{Replay: &ReplayOptions{SourceSessionID: src.ID, LiveTools: p.LiveTools, AllToolsLive: p.AllToolsLive, NextTurns: turns}, AgentVersion: a.Version})
	r := &Run{ID: NewID(), SessionID: fork.ID, Agent: a.Name, Status: steptype.RunQueued, Cursor: a.StartStep, Input: first.Content, Options: opts, CreatedAt: e.now()}
	created, err := e.store.RunCreate(ctx, &store.RunCreateParams{Run: r})
	if err != nil {
		return nil, err
	}
	e.wake()
	return created, nil
}

// ReplayAll replays a session and executes every turn in the caller's
// goroutine; it returns the last run.
func (e *Engine) ReplayAll(ctx context.Context, p ReplayParams) (*Run, error) {
	r, err := e.Replay(ctx, p)
	if err != nil {
		return nil, err
	}
	for {
		if r, err = e.Wait(ctx, e.Execute(ctx, r.ID)); err != nil {
			return nil, err
		}
		next, err := e.store.RunList(ctx, &store.RunListParams{SessionID: r.SessionID, Statuses: []steptype.RunStatus{steptype.RunQueued}})
		if err != nil {
			return nil, err
		}
		if len(next) == 0 || r.Status != steptype.RunCompleted {
			return r, nil
		}
		r = next[0]
	}
}

// queueNextTurn starts the next replayed user turn after a replay run.
func (x *execution) queueNextTurn() error {
	if x.replay == nil || len(x.replay.opts.NextTurns) == 0 || x.run.Hop != 0 {
		return nil
	}
	o := x.replay.opts
	input := o.NextTurns[0]
	o.NextTurns = o.NextTurns[1:]
	opts, _ := json.Marshal(runOptions{Replay: &o, AgentVersion: x.agent.Version})
	r := &Run{ID: NewID(), SessionID: x.run.SessionID, Agent: x.agent.Name, Status: steptype.RunQueued, Input: input, Options: opts, CreatedAt: x.e.now()}
	if _, err := x.e.store.RunCreate(context.WithoutCancel(x.ctx), &store.RunCreateParams{Run: r}); err != nil {
		return fmt.Errorf("queue next replay turn: %w", err)
	}
	x.e.wake()
	return nil
}

func (a *Agent) toolByName(name string) any {
	for _, t := range a.Tools {
		if t.Definition().Name == name {
			return t
		}
	}
	return nil
}

func (a *Agent) subAgentByName(name string) *Agent {
	for _, s := range a.SubAgents {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func containsStr(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// IngestParams record steps produced by an agent running elsewhere.
type IngestParams = wire.IngestParams

// Ingest appends externally produced steps to a session (any language can
// record into Stepwise and get the same log, streams and views). Steps are
// validated (kind, role/kind consistency, status); sequences are assigned
// by the store unless given, in which case they must be the next ones.
// Re-sending a step with the same id is a no-op.
func (e *Engine) Ingest(ctx context.Context, p IngestParams) ([]*Step, error) {
	if _, err := e.store.SessionGet(ctx, &store.SessionGetParams{ID: p.SessionID}); err != nil {
		return nil, fmt.Errorf("session %q: %w", p.SessionID, err)
	}
	if len(p.Steps) == 0 {
		return nil, fmt.Errorf("%w: no steps", store.ErrInvalid)
	}
	now := e.now()
	for i, s := range p.Steps {
		if !s.Kind.Valid() {
			return nil, fmt.Errorf("%w: steps[%d]: unknown kind %q", store.ErrInvalid, i, s.Kind)
		}
		switch s.Role {
		case steptype.RoleNone, steptype.RoleUser, steptype.RoleAssistant, steptype.RoleTool, steptype.RoleSystem:
		default:
			return nil, fmt.Errorf("%w: steps[%d]: unknown role %q", store.ErrInvalid, i, s.Role)
		}
		if s.Role == steptype.RoleTool && s.ToolCallID == "" {
			return nil, fmt.Errorf("%w: steps[%d]: a tool message needs tool_call_id", store.ErrInvalid, i)
		}
		if s.SessionID != "" && s.SessionID != p.SessionID {
			return nil, fmt.Errorf("%w: steps[%d]: session_id %q does not match %q", store.ErrInvalid, i, s.SessionID, p.SessionID)
		}
		if s.ID == "" {
			s.ID = NewID()
		}
		if s.Status == "" {
			s.Status = steptype.StepCompleted
		}
		if s.CreatedAt.IsZero() {
			s.CreatedAt = now
		}
		s.SessionID = p.SessionID
	}
	unlock := e.lockSession(p.SessionID)
	defer unlock()
	out, err := e.store.StepAppend(ctx, &store.StepAppendParams{Steps: p.Steps, Runs: p.Runs})
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	for _, s := range out {
		e.broker.Publish(&Event{Type: EventStepCompleted, SessionID: s.SessionID, RunID: s.RunID, StepName: s.Name, Step: s, Time: now})
	}
	return out, nil
}

// CreateSession creates an empty session (for ingest, or to choose its
// title before the first run).
func (e *Engine) CreateSession(ctx context.Context, agent, title string) (*Session, error) {
	return e.store.SessionCreate(ctx, &store.SessionCreateParams{ID: NewID(), Agent: agent, Title: title, Now: e.now()})
}
