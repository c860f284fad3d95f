package stepwise

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/stepwise-run/stepwise/llm"
	"github.com/stepwise-run/stepwise/steptype"
	"github.com/stepwise-run/stepwise/store"
)

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
}

// ReplayOptions make a run reuse recorded outputs of another session: a
// model response is reused when the new request's fingerprint equals a
// recorded one, a tool result when name and arguments are equal, unless the
// tool is listed in LiveTools (or AllToolsLive). Everything else runs live.
type ReplayOptions struct {
	SourceSessionID string   `json:"source_session_id"`
	LiveTools       []string `json:"live_tools,omitempty"`
	AllToolsLive    bool     `json:"all_tools_live,omitempty"`
	// NextTurns are the user messages of later turns still to replay.
	NextTurns []string `json:"next_turns,omitempty"`
}

// replaySource indexes recorded steps by fingerprint. Each recorded step is
// reused at most once, in order.
type replaySource struct {
	opts  ReplayOptions
	mu    sync.Mutex
	llm   map[string][]*Step
	tools map[string][]*Step
}

func (x *execution) loadReplay(ctx context.Context) error {
	if len(x.run.Options) == 0 {
		return nil
	}
	var o runOptions
	if err := json.Unmarshal(x.run.Options, &o); err != nil {
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
	r := &replaySource{opts: *o.Replay, llm: map[string][]*Step{}, tools: map[string][]*Step{}}
	for _, s := range steps {
		if s.Fingerprint == "" || s.Status != steptype.StepCompleted {
			continue
		}
		switch s.Kind {
		case steptype.KindLLM:
			r.llm[s.Fingerprint] = append(r.llm[s.Fingerprint], s)
		case steptype.KindTool:
			r.tools[s.Fingerprint] = append(r.tools[s.Fingerprint], s)
		}
	}
	x.replay = r
	return nil
}

func (r *replaySource) take(m map[string][]*Step, fp string) *Step {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	q := m[fp]
	if len(q) == 0 {
		return nil
	}
	m[fp] = q[1:]
	return q[0]
}

func (r *replaySource) takeLLM(fp string) *Step {
	if r == nil {
		return nil
	}
	return r.take(r.llm, fp)
}

func (r *replaySource) takeTool(name, fp string) *Step {
	if r == nil || r.opts.AllToolsLive || slices.Contains(r.opts.LiveTools, name) {
		return nil
	}
	return r.take(r.tools, fp)
}

// reuseRecorded copies the recorded output of rec into the step being built.
func reuseRecorded(step, rec *Step) {
	step.Content, step.Reasoning, step.ToolCalls = rec.Content, rec.Reasoning, rec.ToolCalls
	step.Outputs, step.Error, step.Status = rec.Outputs, rec.Error, rec.Status
	m := rec.Metrics
	step.Metrics.InputTokens, step.Metrics.OutputTokens, step.Metrics.CachedTokens = m.InputTokens, m.OutputTokens, m.CachedTokens
	step.Metrics.Model, step.Metrics.Provider = m.Model, m.Provider
	step.Metrics.FinishedAt = step.Metrics.StartedAt
	step.Replay = "reused"
	if step.Metadata == nil {
		step.Metadata = map[string]any{}
	}
	step.Metadata["replayed_from"] = rec.ID
}
