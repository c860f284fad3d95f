package stepwise

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/stepwise-run/stepwise/internal/lineage"

	"github.com/stepwise-run/stepwise/internal/runexec"

	"github.com/stepwise-run/stepwise/llm"
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
	fork, err := e.store.SessionFork(ctx, &store.SessionForkParams{ID: NewID(), ParentID: src.ID, Sequence: first.Sequence, Title: lineage.DerivedTitle(ctx, e.store, "", "replay", src, ""), Now: e.now()})
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
	if x.replay == nil || len(x.replay.Opts.NextTurns) == 0 || x.Run.Hop != 0 {
		return nil
	}
	o := x.replay.Opts
	input := o.NextTurns[0]
	o.NextTurns = o.NextTurns[1:]
	opts, _ := json.Marshal(runOptions{Replay: &o, AgentVersion: x.agent.Version})
	r := &Run{ID: NewID(), SessionID: x.Run.SessionID, Agent: x.agent.Name, Status: steptype.RunQueued, Input: input, Options: opts, CreatedAt: x.e.now()}
	if _, err := x.e.store.RunCreate(context.WithoutCancel(x.Ctx), &store.RunCreateParams{Run: r}); err != nil {
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

// runOptions are engine-owned per-run options stored on the run row.
type runOptions struct {
	Replay *ReplayOptions `json:"replay,omitempty"`
	// ClientTools are tools the caller executes (see client_tools.go).
	ClientTools []llm.ToolDef `json:"client_tools,omitempty"`
	// ToolCallID links a child run to the tool call that started it.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// AgentVersion is the version of the agent definition the run started
	// with (Agent.Version).
	AgentVersion string `json:"agent_version,omitempty"`
	// Breakpoints are the run's own (see breakpoint.go).
	Breakpoints *Breakpoints `json:"breakpoints,omitempty"`
}

// ReplayOptions make a run reuse recorded outputs of another session: a
// model response is reused when the new request's fingerprint equals a
// recorded one, a tool result when name and arguments are equal, unless the
// tool is listed in LiveTools (or AllToolsLive). Everything else runs live.
type ReplayOptions = runexec.ReplayOptions

func (x *execution) loadReplay(ctx context.Context) error {
	if len(x.Run.Options) == 0 {
		return nil
	}
	var o runOptions
	if err := json.Unmarshal(x.Run.Options, &o); err != nil {
		return fmt.Errorf("run options: %w", err)
	}
	x.clientTools = o.ClientTools
	if o.Replay == nil {
		return nil
	}
	if x.parent != nil && x.parent.replay != nil {
		x.replay = x.parent.replay
		return nil
	}
	steps, err := x.e.store.StepList(ctx, &store.StepListParams{SessionID: o.Replay.SourceSessionID})
	if err != nil {
		return fmt.Errorf("load replay source: %w", err)
	}
	r := runexec.NewReplay(*o.Replay, steps)
	x.replay = r
	return nil
}
